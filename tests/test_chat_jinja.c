/* The Jinja interpreter on its own: language features against the text
 * Python's jinja2 3.1.6 renders in transformers' environment (the table
 * below was rendered by jinja2's ImmutableSandboxedEnvironment with
 * trim_blocks, lstrip_blocks, loopcontrols and transformers' tojson, with
 * the messages in MESSAGES), errors where jinja2 raises, and hostile
 * templates (endless loops, runaway recursion, huge output, memory
 * doubling, deep nesting, slow quadratic work) that must fail fast with an
 * error naming the limit, never hang or crash. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "offkv/chat.h"
#include "offkv/gguf.h"

static const char MESSAGES[] = "[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": "
                               "\"Hi \303\251\"}, {\"role\": \"assistant\", \"content\": \"Hello\"}]";

static const struct {
    const char *tmpl, *want, *error; /* want NULL: jinja2 raises (error: a part of its message, or "") */
} cases[] = {
    {"{{ 1 + 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1.5 * 2 }} {{ 10 / 4 }}",
     "3 3 -4 2 3.5 1024 3.0 2.5", NULL},
    {"{{ [1, 'a', none, true, 1.5, (1,), {'k': \"it's\"}] }}",
     "[1, 'a', None, True, 1.5, (1,), {'k': \"it's\"}]", NULL},
    {"{{ 'abc'[::-1] }} {{ 'abcdef'[1:4] }} {{ [1,2,3,4,5][::2] }} {{ [1,2,3][-1] }} {{ 'h\303\251llo'[1] }} {{ 'h\303\251llo'|length }}",
     "cba bcd [1, 3, 5] 3 \303\251 5", NULL},
    {"{% for x in [1,2,3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}|{% endfor %}",
     "10TrueFalse33|21FalseFalse32|32FalseTrue31|", NULL},
    {"{% for x in [1,2,3] if x != 2 %}{{ x }}{{ loop.length }}{% else %}none{% endfor %}{% for x in [] %}{{x}}{% else %}empty{% endfor %}",
     "1232empty", NULL},
    {"{% for x in range(10) %}{% if x == 3 %}{% continue %}{% endif %}{% if x == 6 %}{% break %}{% endif %}{{ x }}{% endfor %}",
     "01245", NULL},
    {"{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}",
     "3", NULL},
    {"{% set x = 1 %}{% for i in range(3) %}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }}",
     "2221", NULL},
    {"{% macro m(a, b='B', c=none) %}[{{ a }}|{{ b }}|{{ c }}]{% endmacro %}{{ m(1) }}{{ m(1, 2) }}{{ m(1, c=3) }}{{ m() }}",
     "[1|B|None][1|2|None][1|B|3][|B|None]", NULL},
    {"{% macro outer() %}<{{ caller() }}>{% endmacro %}{% call outer() %}inside{% endcall %}",
     "<inside>", NULL},
    {"{% macro li(x) %}({{ caller(x) }}){% endmacro %}{% call(v) li(5) %}v={{ v }}{% endcall %}",
     "(v=5)", NULL},
    {"{% filter upper %}hello {{ 'world' }}{% endfilter %}",
     "HELLO WORLD", NULL},
    {"{% set block %}  some {{ 1 }} text  {% endset %}[{{ block }}][{{ block|trim }}]",
     "[  some 1 text  ][some 1 text]", NULL},
    {"{{ messages|tojson }}|{{ messages[0]|tojson(indent=2) }}|{{ {'b': 1, 'a': [1, 2.5, none, true]}|tojson(sort_keys=true) }}",
     "[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi \303\251\"}, {\"role\": \"assistant\", \"content\": \"Hello\"}]|{\n"
     "  \"role\": \"system\",\n"
     "  \"content\": \"Be brief.\"\n"
     "}|{\"a\": [1, 2.5, null, true], \"b\": 1}", NULL},
    {"{{ {'x': '\303\251\"\\\\\\n\\t\\u0001'}|tojson }}{{ 'x'|tojson(separators=(',', ':')) }}{{ {'a':{'b':[]}, 'c': {}}|tojson(indent=4) }}",
     "{\"x\": \"\303\251\\\"\\\\\\n\\t\\u0001\"}\"x\"{\n"
     "    \"a\": {\n"
     "        \"b\": []\n"
     "    },\n"
     "    \"c\": {}\n"
     "}", NULL},
    {"{{ '  a  b  '.split() }}{{ 'a,b,,c'.split(',') }}{{ 'a,b,c'.split(',', 1) }}{{ 'a,b,c'.rsplit(',', 1) }}{{ ' x '.strip() }}{{ 'xxaxx'.strip('x') }}{{ 'ab'.lstrip('a') }}",
     "['a', 'b']['a', 'b', '', 'c']['a', 'b,c']['a,b', 'c']xab", NULL},
    {"{{ 'Hello'.startswith('He') }}{{ 'Hello'.endswith(('lo', 'x')) }}{{ 'hello world'.title() }}{{ 'hELLO'.capitalize() }}{{ 'aaa'.replace('a', 'b', 2) }}{{ 'abc'.replace('', '-') }}",
     "TrueTrueHello WorldHellobba-a-b-c-", NULL},
    {"{{ 'abc'.find('c') }}{{ 'abc'.find('z') }}{{ 'a-b-c'.count('-') }}{{ '-'.join(['a', 'b']) }}{{ 'l1\\nl2\\r\\nl3'.splitlines() }}",
     "2-12a-b['l1', 'l2', 'l3']", NULL},
    {"{{ messages[0].get('role') }}{{ messages[0].get('nope', 'dflt') }}{{ messages[0].items()|list }}{{ messages[0].keys()|list }}",
     "systemdflt[('role', 'system'), ('content', 'Be brief.')]['role', 'content']", NULL},
    {"{{ x is defined }}{{ none is none }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is iterable }}{{ 'a' is sequence }}{{ 1 is number }}{{ true is number }}{{ 1 is integer }}{{ true is integer }}{{ 1.0 is float }}{{ true is boolean }}{{ false is false }}{{ 3 is odd }}{{ 4 is divisibleby 2 }}{{ 'a' is in 'abc' }}{{ 1 is eq 1 }}",
     "FalseTrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrueTrueTrueTrue", NULL},
    {"{{ undefined_thing }}|{{ undefined_thing|default('d') }}|{{ ''|default('e', true) }}|{{ none|default('n') }}|{{ undefined_thing is not defined }}",
     "|d|e|None|True", NULL},
    {"{{ messages|selectattr('role', 'equalto', 'user')|list|length }}{{ messages|rejectattr('role', 'equalto', 'user')|map(attribute='role')|join(',') }}{{ messages|map(attribute='role')|list }}",
     "1system,assistant['system', 'user', 'assistant']", NULL},
    {"{{ [3,1,2]|sort }}{{ [3,1,2]|sort(reverse=true) }}{{ ['b','A','c']|sort }}{{ [1,2,2,3,1]|unique|list }}{{ [3,1,2]|max }}{{ [3,1,2]|min }}{{ [1,2,3]|sum }}{{ [1,2,3]|first }}{{ [1,2,3]|last }}{{ [1,2,3]|reverse|list }}",
     "[1, 2, 3][3, 2, 1]['A', 'b', 'c'][1, 2, 3]31613[3, 2, 1]", NULL},
    {"{{ {'b': 2, 'a': 1}|dictsort }}{{ {'b': 2, 'a': 1}|items|list }}{{ 'abc'|list }}{{ 42|string }}{{ '42'|int + 1 }}{{ '4.5'|float }}{{ 'x'|int }}{{ -3|abs }}{{ 2.567|round(2) }}{{ 2.5|round }}",
     "[('a', 1), ('b', 2)][('b', 2), ('a', 1)]['a', 'b', 'c']42434.5032.572.0", NULL},
    {"{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(4, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}",
     "a\n"
     "  b\n"
     "\n"
     "  c|    a\n"
     "    b|a\n"
     "  \n"
     "  b", NULL},
    {"{{ '<a href=\"x\">&\\'</a>'|e }}{{ '%s and %d'|format('x', 3) }}{{ 'hello world foo'|wordcount }}{{ 'AbC'|lower }}{{ 'AbC'|upper }}",
     "&lt;a href=&#34;x&#34;&gt;&amp;&#39;&lt;/a&gt;x and 33abcABC", NULL},
    {"{{ 'a' ~ 1 ~ none ~ true }}{{ 'a' + 'b' }}{{ [1] + [2] }}{{ 'ab' * 3 }}{{ 1 == 1.0 }}{{ 'a' < 'b' }}{{ [1,2] < [1,3] }}{{ 1 in [1,2] }}{{ 'k' in {'k':1} }}{{ 'x' not in 'abc' }}",
     "a1NoneTrueab[1, 2]abababTrueTrueTrueTrueTrueTrue", NULL},
    {"{{ 1 if true else 2 }}{{ 1 if false }}|{{ 'yes' if messages else 'no' }}{{ not none }}{{ true and 'x' }}{{ false or 'y' }}{{ none or [] }}",
     "1|yesTruexy[]", NULL},
    {"{%- for m in messages -%}\n"
     "  {%- if m.role == 'user' %}\n"
     "    U: {{ m.content }}\n"
     "  {% elif m.role == 'assistant' -%}\n"
     "    A: {{ m.content }}\n"
     "  {%- else %}\n"
     "    other\n"
     "  {%- endif %}\n"
     "{% endfor %}",
     "    other    U: Hi \303\251\n"
     "A: Hello", NULL},
    {"  {% if true %}\n"
     "    indented\n"
     "  {% endif %}\n"
     "{# a comment #}\n"
     "text {#- trimmed -#}   after\n"
     "{%+ if true %}kept{% endif %}\n"
     "   {{ 'var' }}\n"
     "  {%- if true +%}\n"
     " x{% endif %}",
     "    indented\n"
     "textafter\n"
     "kept   var\n"
     " x", NULL},
    {"{% set a, b = [1, 2] %}{{ a }}{{ b }}{% for k, v in {'x': 1, 'y': 2}.items() %}{{ k }}={{ v }};{% endfor %}",
     "12x=1;y=2;", NULL},
    {"{{ strftime_now('%Y-%m-%d %H:%M %A %B %d %b %j') }}",
     "2026-12-01 09:30 Tuesday December 01 Dec 335", NULL},
    {"{% raw %}{{ not rendered }}{% endraw %}{{ \"a\" \"b\" }}{{ 1_000 }}{{ 1e3 }}{{ 0.5 if false else 0.25 }}",
     "{{ not rendered }}ab10001000.00.25", NULL},
    {"{{ messages[0]['content'] }}{{ messages[0].content }}{{ messages.0.role }}{{ messages[5] }}|{{ messages[0].nothing }}",
     "Be brief.Be brief.system|", NULL},
    {"{{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e-5 }} {{ 123456789.123 }} {{ 1/3 }} {{ 2.0 }} {{ -0.0 }} {{ 100.0 }} {{ 1e15 }}",
     "0.30000000000000004 1e+16 1e-05 123456789.123 0.3333333333333333 2.0 -0.0 100.0 1000000000000000.0", NULL},
    {"{{ [none, true, 'a\"b', \"a'b\", 'a\\'b\"c', '\\n'] }}{{ {1: 2, 'x': (1, 2)} }}",
     "[None, True, 'a\"b', \"a'b\", 'a\\'b\"c', '\\n']{1: 2, 'x': (1, 2)}", NULL},
    {"{% if messages[0].content is string and messages|length > 0 %}ok{% endif %}{{ (messages|length - 1) }}{{ messages|length * 2 }}",
     "ok26", NULL},
    {"{{ raise_exception('boom: ' ~ messages|length) }}",
     NULL, "boom: 3"},
    {"{% set d = dict(a=1, b=2) %}{{ d }}{{ d.a }}{% set n = namespace(d) %}{{ n.a }}",
     "{'a': 1, 'b': 2}11", NULL},
    {"{%- set x -%}\n"
     "  a\n"
     "{%- endset -%}\n"
     "[{{ x }}]",
     "[a]", NULL},
    {"{{ ['a', 'b']|map('upper')|list }}{{ [1, none, 2]|select|list }}{{ [1, none, 2]|reject('none')|list }}{{ [1,2,3,4]|select('even')|list }}",
     "['A', 'B'][1, 2][1, 2][2, 4]", NULL},
    {"{{ \"{{\" }} {{ '}}' }} {{ {'a': {'b': 1}}['a']['b'] }}",
     "{{ }} 1", NULL},
    {"{% for m in messages %}{{ loop.previtem.role if loop.previtem is defined else '-' }}{{ loop.nextitem.role if loop.nextitem is defined else '-' }};{% endfor %}",
     "-user;systemassistant;user-;", NULL},
    {"{{ 'a b'|replace(' ', '_') }}{{ 'aXbXc'|replace('X', '') }}{{ '  x  '|trim }}{{ 'xxhixx'|trim('x') }}{{ 'hello world'|title }}{{ 'hello'|capitalize }}",
     "a_babcxhiHello WorldHello", NULL},
    {"a\n"
     "  {%- if true %} b {% endif -%}\n"
     "  c\n"
     "{{- ' d ' -}}\n"
     "e",
     "a b c d e", NULL},
    {"{% for i in range(2) %}\n"
     "  - {{ i }}\n"
     "{% endfor %}\n"
     "done",
     "  - 0\n"
     "  - 1\n"
     "done", NULL},
    {"<{% if false %}x{% else %}{% endif %}>\n"
     "{%- macro f() -%}\n"
     "   body\n"
     "{%- endmacro %}\n"
     "[{{ f() }}]",
     "<>[body]", NULL},
    {"{{ messages | map(attribute='content') | join(' / ') }}{{ messages|join(',', attribute='role') }}",
     "Be brief. / Hi \303\251 / Hellosystem,user,assistant", NULL},
    {"{% if messages[0]['role'] == 'system' %}{% set sys = messages[0]['content'] %}{% set msgs = messages[1:] %}{% else %}{% set sys = '' %}{% set msgs = messages %}{% endif %}{{ sys }}:{{ msgs|length }}",
     "Be brief.:2", NULL},
    {"{{ (1, 2)[0] }}{{ [1, [2, 3]][1][0] }}{{ {'a': 1}.a }}{{ 'abc'.upper() }}{{ ['x'][0].upper() }}",
     "121ABCX", NULL},
    {"{{ 3 > 2 > 1 }}{{ 1 < 3 < 2 }}{{ not 1 == 2 }}{{ -2 ** 2 }}{{ (2 + 3) * 4 }}{{ 2 + 3 * 4 }}{{ 10 - 2 - 3 }}{{ 2 ** 3 ** 2 }}",
     "TrueFalseTrue42014564", NULL},
    {"{% set x = {'k': [1, 2]} %}{{ x['k'] | length }}{{ x.k.1 }}{{ x.get('k')[0] }}{{ x | length }}",
     "2211", NULL},
    {"{% for c in 'h\303\251llo' %}{{ c }}.{% endfor %}{% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %}",
     "h.\303\251.l.l.o.ab", NULL},
    {"{{ undefined_x.attr }}",
     NULL, ""},
    {"{{ messages[0].content.nope.deeper }}",
     NULL, ""},
    {"{% for x in none %}{% endfor %}",
     NULL, ""},
    {"{{ 1 + 'a' }}",
     NULL, ""},
    {"{{ none + 1 }}",
     NULL, ""},
    {"{{ 'x' ~ undefined_var ~ 'y' }}{{ undefined_var|length }}{{ undefined_var|upper }}{{ undefined_var|list }}{% for x in undefined_var %}no{% endfor %}",
     "xy0[]", NULL},
    {"{% set ns = namespace(a=none, b=[]) %}{% set ns.b = ns.b + [1] %}{% set ns.b = ns.b + [2] %}{{ ns.b }}{{ ns.a is none }}",
     "[1, 2]True", NULL},
    {"{{ {'a': 1} == {'a': 1} }}{{ [1, 2] == [1, 2] }}{{ (1, 2) == [1, 2] }}{{ none == none }}{{ 'a' != 'b' }}{{ 1 == true }}",
     "TrueTrueFalseTrueTrueTrue", NULL},
    {"{{ \"\\u00e9\\x41\\n\"|tojson }}{{ '\\\\n' }}{{ \"tab\\there\" }}",
     "\"\303\251A\\n\"\\ntab\there", NULL},
    {"{% if not messages %}empty{% elif messages|length == 3 %}three{% else %}other{% endif %}",
     "three", NULL},
    {"{{ [1,2,3]|batch(2)|list if false else 'skip' }}{{ ['b', 'a']|sort|first }}{{ [{'n': 2}, {'n': 1}]|sort(attribute='n')|map(attribute='n')|list }}",
     "skipa[1, 2]", NULL},
    {"{{ messages|selectattr('content')|list|length }}{{ messages|selectattr('missing', 'defined')|list|length }}{{ messages|selectattr('role', 'in', ['user', 'system'])|list|length }}",
     "302", NULL},
    {"{%- for message in messages %}{%- if loop.index0 == 0 and message.role == 'system' %}{{ '<<SYS>>' + message.content + '<</SYS>>' }}{%- endif %}{%- endfor %}",
     "<<SYS>>Be brief.<</SYS>>", NULL},
    {"{{ 'Hello World'.split(' ')[-1] }}{{ \"a=b=c\".split('=', 1)[1] }}{{ 'x'.join('abc') }}{{ 'abc' in 'xabcx' }}",
     "Worldb=caxbxcTrue", NULL},
    {"{{ 7 % 3 }}{{ 7.5 % 2 }}{{ -7.5 // 2 }}{{ 5 / 1 }}{{ 3 * 1.0 }}{{ true + true }}{{ 1 - 0.1 }}",
     "11.5-4.05.03.020.9", NULL},
    {"{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }}",
     "54321", NULL},
    {"{% set content = '<think>\\nabc\\n</think>\\n\\nanswer' %}{{ content.split('</think>')[-1].lstrip('\\n') }}|{{ content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}",
     "answer|abc", NULL},
    {"{{ \"%s has %d items\" % (\"list\", 3) }}{{ \"%s!\" % \"hi\" }}{{ \"100%%\" % () }}{{ \"%r\" % (\"a\",) }}",
     "list has 3 itemshi!100%'a'", NULL},
    {"{% for m in messages %}{{ loop.revindex0 }}{{ loop.depth }}{% endfor %}{{ messages|length is odd }}",
     "211101True", NULL},
    {"{% set t = (1, 'a') %}{{ t }}{{ t|list }}{{ t[1] }}{{ (1,) + (2,) }}",
     "(1, 'a')[1, 'a']a(1, 2)", NULL},
    {"{{ {'a': none}.a is none }}{{ {'a': none}.b is defined }}{{ [none]|first is none }}",
     "TrueFalseTrue", NULL},
    {"{% macro f(x) -%}\n"
     "  [{{ x }}]\n"
     "{%- endmacro %}\n"
     "{{ f(1) }}|{{ f('y') | trim }}",
     "[1]|[y]", NULL},
    {"{{ 'h\303\251llo w\303\266rld \303\277'|upper }}|{{ '\303\200\303\211\303\216 \304\200\304\236 \316\221\316\222\316\223 \320\220\320\221\320\222'|lower }}|{{ '\303\247a va-bien (ok) \"x\" \303\251a'|title }}|{{ '\303\251COLE'.capitalize() }}|{{ 'l'\303\251lan d'or'.title() }}|{{ '\307\205'|upper }}",
     NULL, ""},
    /* 64-bit edges that used to trap or overflow (jinja2's values) */
    {"{{ (-9223372036854775807 - 1) is divisibleby(-1) }} {{ [1,2][1::9223372036854775807] }} {{ 'ab'[1::9223372036854775807] }} "
     "{{ [1,2,3][::-9223372036854775807] }} {{ 1 ** 9223372036854775807 }} {{ (-1) ** 9223372036854775807 }} {{ 0 ** 0 }} "
     "{{ range(-9223372036854775807, 9223372036854775807, 4611686018427387904)|list }}",
     "True [2] b [3] 1 -1 1 [-9223372036854775807, -4611686018427387903, 1, 4611686018427387905]", NULL},
    /* a namespace holding itself prints as Python's repr does (it recursed until the stack ran out) */
    {"{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", "<Namespace {'me': <Namespace {...}>}>", NULL},
    {"{{ {(1, 2): 'pair'}[1, 2] }}{{ (1, 'x') * 2 }}{{ 'init'|map(attribute='role')|list }}{{ [none, x] }}",
     "pair(1, 'x', 1, 'x')[Undefined, Undefined, Undefined, Undefined][None, Undefined]", NULL},
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Renders tmpl over MESSAGES; returns the status, the text in *out. */
static okv_status render(const char *tmpl, const okv_chat_limits *lim, char **out, okv_error *err) {
    *out = NULL;
    okv_chat_template *t = okv_chat_template_parse(tmpl, strlen(tmpl), err);
    if (!t) return err->status;
    okv_chat_template_set_tokens(t, "<s>", "</s>", NULL);
    okv_chat_input in = {.messages_json = MESSAGES, .add_generation_prompt = true, .now = "2026-12-01T09:30:00",
                         .limits = lim};
    okv_status st = okv_chat_template_render(t, &in, out, NULL, err);
    okv_chat_template_free(t);
    return st;
}

static void check_table(void) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out;
        okv_error err;
        okv_status st = render(cases[i].tmpl, NULL, &out, &err);
        if (cases[i].want) {
            CHECK(st == OKV_OK && strcmp(out, cases[i].want) == 0, "case %zu '%.60s': got %s '%s', want '%s'", i,
                  cases[i].tmpl, okv_status_name(st), st == OKV_OK ? out : err.message, cases[i].want);
        } else {
            CHECK(st == OKV_ERR_FORMAT && strstr(err.message, cases[i].error), "case %zu '%.60s': got %s '%s', want a failure '%s'",
                  i, cases[i].tmpl, okv_status_name(st), st == OKV_OK ? out : err.message, cases[i].error);
        }
        free(out);
    }
}

/* Hostile templates: each must fail with OKV_ERR_FORMAT, a message
 * containing what, and within a few seconds. */
static void check_hostile(const char *name, const char *tmpl, const okv_chat_limits *lim, const char *what) {
    char *out;
    okv_error err;
    /* Under valgrind a render runs 50 times slower: only the cases about
     * the clock keep its default (or their own) deadline. */
    okv_chat_limits l = lim ? *lim : (okv_chat_limits){0};
    if (!l.max_seconds) l.max_seconds = 600;
    double t0 = now_s();
    okv_status st = render(tmpl, &l, &out, &err);
    double dt = now_s() - t0;
    CHECK(st == OKV_ERR_FORMAT && strstr(err.message, what), "%s: got %s '%s', want a failure naming '%s'", name,
          okv_status_name(st), st == OKV_OK ? "(rendered)" : err.message, what);
    CHECK(dt < 120, "%s: took %.1f s (a hang?)", name, dt);
    free(out);
}

static char *repeat(const char *a, int n, const char *mid, const char *b) {
    size_t la = strlen(a), lb = strlen(b), lm = strlen(mid);
    char *s = malloc(la * (size_t)n + lm + lb * (size_t)n + 1), *p = s;
    for (int i = 0; i < n; i++, p += la) memcpy(p, a, la);
    memcpy(p, mid, lm);
    p += lm;
    for (int i = 0; i < n; i++, p += lb) memcpy(p, b, lb);
    *p = '\0';
    return s;
}

static void check_hostiles(void) {
    check_hostile("range too long", "{% for i in range(100000000000) %}{% endfor %}", NULL, "iterations");
    okv_chat_limits few = {.max_iterations = 10000};
    check_hostile("nested loops", "{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}"
                  "{% endfor %}{% endfor %}{% endfor %}", &few, "more than 10000 loop iterations");
    /* with the default limits, the loops' memory runs out first */
    check_hostile("nested loops, defaults", "{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}"
                  "{% endfor %}{% endfor %}{% endfor %}", NULL, "the template");
    check_hostile("endless recursion", "{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}", NULL, "macro calls nested more than 100 deep");
    check_hostile("mutual recursion", "{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}",
                  NULL, "macro calls nested more than 100 deep");
    check_hostile("huge output", "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", NULL, "output exceeds");
    check_hostile("doubling", "{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
                  NULL, "memory");
    check_hostile("list doubling", "{% set ns = namespace(l=[1]) %}{% for i in range(100) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
                  NULL, "memory");
    check_hostile("huge repeat", "{{ 'x' * 100000000000000000000 }}", NULL, "beyond 64 bits");
    check_hostile("huge repeat", "{{ 'xxxxxxxxxxxxxxxx' * 1000000000000000000 }}", NULL, "too large");
    check_hostile("repeat into memory", "{{ 'x' * 1000000000 }}", NULL, "memory");
    okv_chat_limits quick = {.max_seconds = 0.5};
    check_hostile("quadratic scans", "{% set big = range(100000)|list %}{% for i in range(100000) %}{% if -1 in big %}"
                  "{% endif %}{% endfor %}", &quick, "longer than");
    check_hostile("filter chains", "{% set big = range(500000)|list %}{% for i in range(100000) %}{% set x = big|map('string')|list %}"
                  "{% endfor %}", &quick, "");
    check_hostile("unique of a million", "{{ range(1000000)|unique|length }}", &quick, "longer than");
    check_hostile("%d of a huge float", "{{ '%d' % 1e300 }}", NULL, "not a 64-bit integer");
    char *zeros = repeat("0", 70, ".0", "");
    char *lit = malloc(strlen(zeros) + 8);
    sprintf(lit, "{{ %s }}", zeros);
    check_hostile("a long float literal", lit, NULL, "too long"); /* wrote a byte past its buffer */
    free(lit);
    free(zeros);
    okv_chat_limits small = {.max_output = 100};
    check_hostile("output limit honoured", "{{ 'y' * 101 }}", &small, "output exceeds 100 bytes");

    char *deep = repeat("(", 5000, "1", ")");
    char *tmpl = malloc(strlen(deep) + 8);
    sprintf(tmpl, "{{ %s }}", deep);
    check_hostile("deep parentheses", tmpl, NULL, "nested too deep");
    free(tmpl);
    free(deep);
    char *ifs = repeat("{% if true %}", 5000, "x", "{% endif %}");
    check_hostile("deep blocks", ifs, NULL, "nested too deep");
    free(ifs);
    char *nots = repeat("not ", 100000, "true", "");
    tmpl = malloc(strlen(nots) + 8);
    sprintf(tmpl, "{{ %s }}", nots);
    check_hostile("deep not", tmpl, NULL, "nested too deep");
    free(tmpl);
    free(nots);

    /* Nothing outside the data: Python's internals are plain undefined names. */
    char *out;
    okv_error err;
    okv_status st = render("[{{ messages.__class__ }}{{ config }}{{ self }}{{ cycler }}{{ lipsum }}{{ ''.__class__ }}]", NULL, &out, &err);
    CHECK(st == OKV_OK && strcmp(out, "[]") == 0, "sandbox: %s '%s'", okv_status_name(st), st ? err.message : out);
    free(out);
    st = render("{{ ''.__class__.__mro__ }}", NULL, &out, &err);
    CHECK(st == OKV_ERR_FORMAT, "an attribute of an undefined value must fail: %s", okv_status_name(st));
    free(out);
    /* An empty string repeated any number of times is empty, at once. */
    st = render("[{{ '' * 1000000000000000000 }}]", NULL, &out, &err);
    CHECK(st == OKV_OK && strcmp(out, "[]") == 0, "'' * big: %s", st ? err.message : out);
    free(out);
}

static void check_errors(void) {
    okv_error err;
    /* Syntax errors name the line and column. */
    const char *bad = "line one\n{% if x %}\n  {{ 1 + }}\n{% endif %}";
    okv_chat_template *t = okv_chat_template_parse(bad, strlen(bad), &err);
    CHECK(!t && err.status == OKV_ERR_FORMAT && strstr(err.message, "line 3, column 10"), "syntax error: %s", err.message);
    okv_chat_template_free(t);
    const char *unclosed = "{% for x in y %}\n{{ x }}";
    t = okv_chat_template_parse(unclosed, strlen(unclosed), &err);
    CHECK(!t && strstr(err.message, "endfor"), "unclosed for: %s", err.message);
    const char *unknown = "\n\n  {% include 'x' %}";
    t = okv_chat_template_parse(unknown, strlen(unknown), &err);
    CHECK(!t && strstr(err.message, "line 3, column 6") && strstr(err.message, "include"), "unknown statement: %s", err.message);
    const char *comment = "{# never closed";
    t = okv_chat_template_parse(comment, strlen(comment), &err);
    CHECK(!t && strstr(err.message, "comment"), "unclosed comment: %s", err.message);

    /* A raise carries the template's message and line. */
    char *out;
    okv_status st = render("a\nb\n{%- if messages %}\n{{ raise_exception('Only user and assistant roles!') }}{% endif %}", NULL,
                           &out, &err);
    CHECK(st == OKV_ERR_FORMAT && strcmp(err.message, "line 4: Only user and assistant roles!") == 0, "raise: %s", err.message);

    /* Input that is not JSON of the right shape is the caller's error. */
    t = okv_chat_template_parse("{{ messages }}", 14, &err);
    okv_chat_input in = {.messages_json = "[{\"role\": \"user\", \"content\": \"x\"}, ]"};
    st = okv_chat_template_render(t, &in, &out, NULL, &err);
    CHECK(st == OKV_ERR_INVALID && strstr(err.message, "byte 35") && out == NULL, "bad JSON: %s %s", okv_status_name(st), err.message);
    in.messages_json = "{\"role\": \"user\"}";
    st = okv_chat_template_render(t, &in, &out, NULL, &err);
    CHECK(st == OKV_ERR_INVALID && strstr(err.message, "array"), "not an array: %s", err.message);
    in.messages_json = "[]";
    in.now = "2026-13-01T00:00:00";
    st = okv_chat_template_render(t, &in, &out, NULL, &err);
    CHECK(st == OKV_ERR_INVALID && strstr(err.message, "2026-13-01"), "bad now: %s", err.message);
    in.now = NULL;
    in.extra_json = "{\"enable_thinking\": false}";
    st = okv_chat_template_render(t, &in, &out, NULL, &err);
    CHECK(st == OKV_OK && strcmp(out, "[]") == 0, "extra: %s", st ? err.message : out);
    free(out);
    okv_chat_template_free(t);
    const char *vars = "{{ enable_thinking }}|{{ tools|length }}";
    t = okv_chat_template_parse(vars, strlen(vars), &err);
    in.tools_json = "[{\"type\": \"function\"}]";
    st = okv_chat_template_render(t, &in, &out, NULL, &err);
    CHECK(st == OKV_OK && strcmp(out, "False|1") == 0, "extra + tools: %s", st ? err.message : out);
    free(out);
    okv_chat_template_free(t);
    CHECK(okv_chat_template_parse(NULL, 0, &err) == NULL && err.status == OKV_ERR_INVALID, "NULL text");
}

/* A GGUF's template and its bos / eos texts. */
static void check_gguf(void) {
    okv_error err;
    okv_gguf_writer *w = okv_gguf_writer_create(&err);
    const char *tokens[] = {"<unk>", "<|begin|>", "<|end|>", "a"};
    okv_gguf_writer_add_str(w, "tokenizer.chat_template", "{{ bos_token }}{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}", &err);
    okv_gguf_writer_add_array(w, "tokenizer.ggml.tokens", OKV_GGUF_STRING, tokens, 4, &err);
    uint32_t bos = 1, eos = 2;
    okv_gguf_writer_add_scalar(w, "tokenizer.ggml.bos_token_id", OKV_GGUF_U32, &bos, &err);
    okv_gguf_writer_add_scalar(w, "tokenizer.ggml.eos_token_id", OKV_GGUF_U32, &eos, &err);
    void *data;
    size_t size;
    CHECK_STATUS(okv_gguf_writer_to_memory(w, &data, &size, &err), OKV_OK, err);
    okv_gguf_writer_free(w);
    okv_gguf *g = okv_gguf_open_memory(data, size, &err);
    CHECK(g != NULL, "open: %s", err.message);
    okv_chat_template *t = okv_chat_template_from_gguf(g, &err);
    CHECK(t != NULL, "from_gguf: %s", err.message);
    if (t) {
        char *out;
        okv_chat_input in = {.messages_json = "[{\"role\": \"user\", \"content\": \"hi\"}]"};
        CHECK_STATUS(okv_chat_template_render(t, &in, &out, NULL, &err), OKV_OK, err);
        CHECK(out && strcmp(out, "<|begin|>hi<|end|>") == 0, "from_gguf render: '%s'", out ? out : "");
        free(out);
    }
    okv_chat_template_free(t);
    okv_gguf_close(g);
    free(data);

    w = okv_gguf_writer_create(&err);
    okv_gguf_writer_add_str(w, "general.name", "no template", &err);
    okv_gguf_writer_to_memory(w, &data, &size, &err);
    okv_gguf_writer_free(w);
    g = okv_gguf_open_memory(data, size, &err);
    t = okv_chat_template_from_gguf(g, &err);
    CHECK(!t && err.status == OKV_ERR_NOT_FOUND, "no template: %s", okv_status_name(err.status));
    okv_gguf_close(g);
    free(data);
}

/* 20 000 elifs: parsed and rendered without a frame per elif (the chain
 * was recursed into: on a thread with a 256 KiB stack that overflowed, and
 * rendering stopped at the evaluation depth limit). */
typedef struct elif_job {
    const char *tmpl;
    okv_status st;
    char *out;
    okv_error err;
} elif_job;

static void *elif_run(void *arg) {
    elif_job *j = arg;
    j->st = render(j->tmpl, NULL, &j->out, &j->err);
    return NULL;
}

static void check_long_elif(void) {
    enum { N = 20000 };
    char *t = malloc((size_t)N * 40 + 64), *p = t;
    p += sprintf(p, "{%% set x = %d %%}{%% if x == 0 %%}0", N - 1);
    for (int i = 1; i < N; i++) p += sprintf(p, "{%% elif x == %d %%}%d", i, i);
    sprintf(p, "{%% else %%}none{%% endif %%}");
    elif_job j = {.tmpl = t};
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 256 * 1024);
    pthread_t th;
    CHECK(pthread_create(&th, &at, elif_run, &j) == 0, "thread");
    pthread_join(th, NULL);
    pthread_attr_destroy(&at);
    char want[16];
    snprintf(want, sizeof want, "%d", N - 1);
    CHECK(j.st == OKV_OK && j.out && strcmp(j.out, want) == 0, "%d elifs: %s '%.40s' (%s)", N, okv_status_name(j.st),
          j.out ? j.out : "", j.err.message);
    free(j.out);
    free(t);
}

int main(void) {
    check_long_elif();
    check_table();
    check_hostiles();
    check_errors();
    check_gguf();
    return check_done();
}
