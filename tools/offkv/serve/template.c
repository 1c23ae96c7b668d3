/* Chat templates: the model's own Jinja template (tokenizer.chat_template),
 * a file (--chat-template-file) or a template llama.cpp names
 * (--chat-template chatml, llama3, ...), rendered by liboffkv's interpreter
 * (offkv/chat.h) as Hugging Face renders it; and what of a request the
 * template sees: the messages with their tool calls, the tools, and
 * chat_template_kwargs.
 *
 * The named templates are Jinja texts that render llama.cpp's
 * llm_chat_apply_template formats (test_serve_template checks them against
 * llama.cpp's outputs), so the hand-written renderers they replace are
 * gone: one renderer serves every template. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "offkv/gguf.h"
#include "offkv/tokenizer.h"
#include "serve.h"

/* ---- the templates llama.cpp names ---- */

#define MISTRAL(lead, trail, strip)                                                                                \
    "{% set ns = namespace(inside=false) %}{% for m in messages %}{% set c = m.content or '' %}"                   \
    "{% if not ns.inside %}{{ '" lead "[INST]" trail "' }}{% set ns.inside = true %}{% endif %}"                   \
    "{% if m.role == 'system' %}{{ c ~ '\\n\\n' }}{% elif m.role == 'user' %}{{ c ~ '" lead "[/INST]' }}"          \
    "{% else %}{{ '" trail "' ~ (c|trim if " strip " else c) ~ '</s>' }}{% set ns.inside = false %}{% endif %}" \
    "{% endfor %}"

#define LLAMA2(sys, bos_inside, strip)                                                                              \
    "{% set ns = namespace(inside=true) %}{{ '[INST] ' }}{% for m in messages %}{% set c = m.content or '' %}"     \
    "{% if " strip " %}{% set c = c|trim %}{% endif %}"                                                             \
    "{% if not ns.inside %}{% set ns.inside = true %}{{ '<s>[INST] ' if " bos_inside " else '[INST] ' }}{% endif %}" \
    "{% if m.role == 'system' %}{{ ('<<SYS>>\\n' if " sys " else '') ~ c ~ ('\\n<</SYS>>\\n\\n' if " sys           \
    " else '\\n') }}{% elif m.role == 'user' %}{{ c ~ ' [/INST]' }}{% else %}{{ c ~ '</s>' }}"                      \
    "{% set ns.inside = false %}{% endif %}{% endfor %}"

static const struct {
    const char *name, *jinja;
} builtins[] = {
    {"chatml", "{% for m in messages %}{{ '<|im_start|>' ~ m.role ~ '\\n' ~ (m.content or '') ~ '<|im_end|>\\n' }}"
               "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"},
    {"llama2", LLAMA2("false", "false", "false")},
    {"llama2-sys", LLAMA2("true", "false", "false")},
    {"llama2-sys-bos", LLAMA2("true", "true", "false")},
    {"llama2-sys-strip", LLAMA2("true", "false", "true")},
    {"mistral-v1", MISTRAL(" ", " ", "false")},
    {"mistral-v3", MISTRAL("", " ", "true")},
    {"mistral-v3-tekken", MISTRAL("", "", "false")},
    {"mistral-v7", "{% for m in messages %}{% set c = m.content or '' %}{% if m.role == 'system' %}"
                   "{{ '[SYSTEM_PROMPT] ' ~ c ~ '[/SYSTEM_PROMPT]' }}{% elif m.role == 'user' %}{{ '[INST] ' ~ c ~ '[/INST]' }}"
                   "{% else %}{{ ' ' ~ c ~ '</s>' }}{% endif %}{% endfor %}"},
    {"llama3", "{% for m in messages %}{{ '<|start_header_id|>' ~ m.role ~ '<|end_header_id|>\\n\\n' ~ (m.content or '')|trim"
               " ~ '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}"
               "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"},
    {"gemma", "{% set ns = namespace(sys='') %}{% for m in messages %}{% set c = (m.content or '')|trim %}"
              "{% if m.role == 'system' %}{% set ns.sys = ns.sys ~ c %}{% else %}{% set model = m.role == 'assistant' %}"
              "{{ '<start_of_turn>' ~ ('model' if model else m.role) ~ '\\n' }}{% if ns.sys and not model %}"
              "{{ ns.sys ~ '\\n\\n' }}{% set ns.sys = '' %}{% endif %}{{ c ~ '<end_of_turn>\\n' }}{% endif %}{% endfor %}"
              "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"},
};

const char *srv_template_builtin(const char *name) {
    for (size_t i = 0; name && i < sizeof builtins / sizeof builtins[0]; i++)
        if (strcmp(name, builtins[i].name) == 0) return builtins[i].jinja;
    return NULL;
}

const char *srv_template_names(void) {
    return "chatml, llama2, llama2-sys, llama2-sys-bos, llama2-sys-strip, mistral-v1, mistral-v3, "
           "mistral-v3-tekken, mistral-v7, llama3, gemma";
}

/* ---- loading ---- */

struct srv_chat {
    okv_chat_template *tmpl;
    char what[200];   /* where it came from, for the start line */
    bool strip_bos;   /* the tokenizer adds BOS itself: a rendered leading bos_token goes */
};

static srv_chat *chat_from_text(const char *text, size_t len, const char *what, const okv_tokenizer *tok, char *err,
                                size_t cap) {
    okv_error e;
    okv_chat_template *t = okv_chat_template_parse(text, len, &e);
    if (!t) {
        snprintf(err, cap, "%s: %s", what, e.message);
        return NULL;
    }
    srv_chat *c = calloc(1, sizeof *c);
    if (!c) {
        okv_chat_template_free(t);
        snprintf(err, cap, "out of memory for the chat template");
        return NULL;
    }
    c->tmpl = t;
    snprintf(c->what, sizeof c->what, "%s", what);
    srv_chat_use_tokenizer(c, tok);
    return c;
}

void srv_chat_use_tokenizer(srv_chat *c, const okv_tokenizer *tok) {
    okv_chat_template *t = c->tmpl;
    if (tok) {
        /* bos_token / eos_token: the vocabulary's texts of its BOS and EOS */
        size_t n;
        int32_t bos = okv_tokenizer_bos(tok), eos = okv_tokenizer_eos(tok);
        const char *b = bos >= 0 ? okv_tokenizer_token_text(tok, bos, &n) : NULL;
        char *bs = b ? strndup(b, n) : NULL;
        const char *e2 = eos >= 0 ? okv_tokenizer_token_text(tok, eos, &n) : NULL;
        char *es = e2 ? strndup(e2, n) : NULL;
        okv_chat_template_set_tokens(t, bs, es, NULL);
        free(bs);
        free(es);
        c->strip_bos = okv_tokenizer_adds_bos(tok) && bos >= 0;
    }
}

srv_chat *srv_chat_load(const char *model_path, const okv_tokenizer *tok, const char *name, const char *file, char *err,
                        size_t cap) {
    if (file) {
        FILE *f = fopen(file, "rb");
        if (!f) {
            snprintf(err, cap, "cannot open --chat-template-file '%s': %s", file, strerror(errno));
            return NULL;
        }
        char *text = NULL;
        size_t n = 0, room = 0;
        for (;;) {
            if (n + 4096 > room) {
                char *p = realloc(text, room = room ? room * 2 : 65536);
                if (!p) {
                    free(text);
                    fclose(f);
                    snprintf(err, cap, "out of memory for '%s'", file);
                    return NULL;
                }
                text = p;
            }
            size_t got = fread(text + n, 1, room - n, f);
            n += got;
            if (got == 0) break;
        }
        const int bad = ferror(f) ? (errno ? errno : EIO) : 0;
        fclose(f);
        if (bad) {
            free(text);
            snprintf(err, cap, "cannot read --chat-template-file '%s': %s", file, strerror(bad));
            return NULL;
        }
        char what[200];
        snprintf(what, sizeof what, "--chat-template-file %s", file);
        srv_chat *c = chat_from_text(text, n, what, tok, err, cap);
        free(text);
        return c;
    }
    if (name) {
        const char *j = srv_template_builtin(name);
        if (j) return chat_from_text(j, strlen(j), name, tok, err, cap);
        if (strstr(name, "{%") || strstr(name, "{{")) return chat_from_text(name, strlen(name), "--chat-template (Jinja text)", tok, err, cap);
        snprintf(err, cap, "unknown --chat-template '%s': expected one of %s, or a Jinja template's text", name, srv_template_names());
        return NULL;
    }
    okv_error e = {0};
    okv_gguf *g = okv_gguf_open(model_path, &e);
    const char *t = NULL;
    size_t len = 0;
    if (!g || okv_gguf_find_key(g, "tokenizer.chat_template") < 0 ||
        okv_gguf_get_str(g, "tokenizer.chat_template", &t, &len, &e) != OKV_OK) {
        okv_gguf_close(g);
        /* no template in the file: ChatML, as llama.cpp, and said at start */
        const char *j = srv_template_builtin("chatml");
        return chat_from_text(j, strlen(j), "chatml (the model has no tokenizer.chat_template)", tok, err, cap);
    }
    char what[200];
    snprintf(what, sizeof what, "the model's tokenizer.chat_template (%zu bytes)", len);
    srv_chat *c = chat_from_text(t, len, what, tok, err, cap);
    okv_gguf_close(g);
    return c;
}

void srv_chat_free(srv_chat *c) {
    if (!c) return;
    okv_chat_template_free(c->tmpl);
    free(c);
}

const char *srv_chat_source(const srv_chat *c) {
    const char *t = c && c->tmpl ? okv_chat_template_source(c->tmpl) : NULL;
    return t ? t : "";
}

const char *srv_chat_describe(const srv_chat *c) { return c->what; }

/* Whether the template shows the model the tools (else the server tells
 * the model about them itself, below). */
static bool renders_tools(const srv_chat *c) { return strstr(okv_chat_template_source(c->tmpl), "tools") != NULL; }

/* Whether the template writes DeepSeek's calls in its history: DeepSeek R1's
 * and V3.1's list no tools, but their models call in that format, so they
 * are told the tools in DeepSeek's words, not llama.cpp's generic JSON. */
static bool deepseek_calls(const srv_chat *c) {
    return okv_chat_template_syntax(c->tmpl, "").format == OKV_CHAT_FORMAT_DEEPSEEK;
}

okv_chat_syntax srv_chat_syntax(const srv_chat *c, const char *prompt) {
    okv_chat_syntax syn = okv_chat_template_syntax(c->tmpl, prompt);
    if (!renders_tools(c) && syn.format != OKV_CHAT_FORMAT_DEEPSEEK) syn.format = OKV_CHAT_FORMAT_GENERIC;
    return syn;
}

/* The tools in llama.cpp's generic form: their JSON, and the JSON answer
 * expected. */
static char *generic_tools_text(const cJSON *tools) {
    char *json = cJSON_PrintUnformatted(tools), *text = NULL;
    size_t n = 0;
    FILE *f = json ? open_memstream(&text, &n) : NULL;
    if (f) {
        fprintf(f, "You can call any of the following tools to satisfy the user's requests: %s\n\n"
                   "Respond in JSON format, either with {\"tool_call\": {\"name\": ..., \"arguments\": {...}}} to call a tool, "
                   "or with {\"response\": \"...\"} to reply to the user's request.", json);
        if (fclose(f)) free(text), text = NULL;
    }
    free(json);
    return text;
}

/* The tools as DeepSeek V3.1's model card lays out its system prompt: a
 * section per tool, then the call format.  The format is V3.1's
 * NAME<sep>ARGUMENTS, the one the tool grammar forces (the parser also
 * reads R1's function<sep>NAME and fenced JSON). */
#define DS(x) "<\xef\xbd\x9ctool\xe2\x96\x81" x "\xef\xbd\x9c>"
static char *deepseek_tools_text(const cJSON *tools) {
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f) return NULL;
    fputs("## Tools\nYou have access to the following tools:\n", f);
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name"), *desc = cJSON_GetObjectItemCaseSensitive(fn, "description");
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        if (!cJSON_IsString(name)) continue; /* the request's check let none through */
        char *ps = cJSON_IsObject(params) ? cJSON_PrintUnformatted(params) : NULL;
        fprintf(f, "\n### %s\nDescription: %s\n\nParameters: %s\n", name->valuestring, cJSON_IsString(desc) ? desc->valuestring : "",
                ps ? ps : "{}");
        free(ps);
    }
    fputs("\nIMPORTANT: ALWAYS adhere to this exact format for tool use:\n"
          DS("calls\xe2\x96\x81" "begin") DS("call\xe2\x96\x81" "begin") "tool_call_name" DS("sep") "tool_call_arguments"
          DS("call\xe2\x96\x81" "end") "{{additional_tool_calls}}" DS("calls\xe2\x96\x81" "end") "\n\n"
          "Where:\n"
          "- `tool_call_name` must be an exact match to one of the available tools\n"
          "- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema\n"
          "- For multiple tool calls, chain them directly without separators or spaces",
          f);
    if (fclose(f)) free(text), text = NULL;
    return text;
}
#undef DS

/* For a template without a tool section: the tools (and, generic, the
 * answer expected) as a system message, added to the first one or put
 * first. */
static char *with_tools_turn(const char *messages_json, const char *tools_json, bool deepseek) {
    cJSON *ms = cJSON_Parse(messages_json), *tools = cJSON_Parse(tools_json);
    char *out = NULL, *tools_text = !cJSON_IsArray(tools) ? NULL : deepseek ? deepseek_tools_text(tools) : generic_tools_text(tools);
    if (!cJSON_IsArray(ms) || !tools_text) goto done;
    cJSON *first = cJSON_GetArrayItem(ms, 0), *role = first ? cJSON_GetObjectItemCaseSensitive(first, "role") : NULL;
    cJSON *content = first ? cJSON_GetObjectItemCaseSensitive(first, "content") : NULL;
    bool has_system = cJSON_IsString(role) && !strcmp(role->valuestring, "system") && cJSON_IsString(content);
    size_t n = strlen(tools_text) + (has_system ? strlen(content->valuestring) + 2 : 0) + 1;
    char *text = malloc(n);
    if (!text) goto done;
    snprintf(text, n, "%s%s%s", has_system ? content->valuestring : "", has_system ? "\n\n" : "", tools_text);
    if (has_system) cJSON_ReplaceItemInObjectCaseSensitive(first, "content", cJSON_CreateString(text));
    else {
        cJSON *sys = cJSON_CreateObject();
        cJSON_AddStringToObject(sys, "role", "system");
        cJSON_AddStringToObject(sys, "content", text);
        cJSON_InsertItemInArray(ms, 0, sys);
    }
    free(text);
    out = cJSON_PrintUnformatted(ms);
done:
    cJSON_Delete(ms);
    cJSON_Delete(tools);
    free(tools_text);
    return out;
}

/* ---- what a request gives the template ---- */

/* The messages as the template sees them: "developer" as "system", text
 * parts joined into one string, and tool calls' arguments (a JSON string
 * in OpenAI's requests) as objects, as transformers passes them. */
static bool template_messages(const cJSON *ms, char **out, srv_fail *f) {
    cJSON *copy = cJSON_Duplicate(ms, true);
    if (!copy) return srv_bad(f, "messages", "out of memory");
    int i = 0;
    cJSON *m;
    cJSON_ArrayForEach(m, copy) {
        cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (cJSON_IsString(role) && strcmp(role->valuestring, "developer") == 0)
            cJSON_ReplaceItemInObjectCaseSensitive(m, "role", cJSON_CreateString("system"));
        cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (cJSON_IsArray(content)) {
            size_t n = 0;
            cJSON *part;
            cJSON_ArrayForEach(part, content) {
                cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
                if (cJSON_IsString(t)) n += strlen(t->valuestring);
            }
            char *s = malloc(n + 1);
            if (!s) {
                cJSON_Delete(copy);
                return srv_bad(f, "messages", "out of memory");
            }
            size_t at = 0;
            cJSON_ArrayForEach(part, content) {
                cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
                if (cJSON_IsString(t)) {
                    memcpy(s + at, t->valuestring, strlen(t->valuestring));
                    at += strlen(t->valuestring);
                }
            }
            s[at] = '\0';
            cJSON_ReplaceItemInObjectCaseSensitive(m, "content", cJSON_CreateString(s));
            free(s);
        }
        cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        if (calls && !cJSON_IsNull(calls)) {
            if (!cJSON_IsArray(calls)) {
                cJSON_Delete(copy);
                return srv_bad(f, "messages", "messages[%d].tool_calls must be an array", i);
            }
            cJSON *c;
            cJSON_ArrayForEach(c, calls) {
                cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
                cJSON *name = fn ? cJSON_GetObjectItemCaseSensitive(fn, "name") : NULL;
                if (!cJSON_IsObject(c) || !cJSON_IsObject(fn) || !cJSON_IsString(name)) {
                    cJSON_Delete(copy);
                    return srv_bad(f, "messages", "messages[%d].tool_calls[] must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}", i);
                }
                cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
                if (cJSON_IsString(args)) {
                    cJSON *obj = cJSON_Parse(args->valuestring);
                    if (cJSON_IsObject(obj)) cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", obj);
                    else cJSON_Delete(obj); /* not an object: the template sees the string */
                }
            }
        }
        i++;
    }
    *out = cJSON_PrintUnformatted(copy);
    cJSON_Delete(copy);
    return *out ? true : srv_bad(f, "messages", "out of memory");
}

/* The reasoning efforts OpenAI's reasoning_effort and Anthropic's
 * output_config.effort name, lowest first (both are open lists: a value
 * neither names yet is a 400 that lists these, not a word the model was
 * never shown). */
static const char *const efforts[] = {"none", "minimal", "low", "medium", "high", "xhigh", "max"};

bool srv_effort_ok(const char *effort) {
    for (size_t i = 0; i < sizeof efforts / sizeof efforts[0]; i++)
        if (!strcmp(effort, efforts[i])) return true;
    return false;
}

/* chat_template_kwargs, the extra variables the template sees, with
 * reasoning_effort (OpenAI's parameter) among them: gpt-oss's template
 * reads that variable ("Reasoning: high" in its system turn; "medium"
 * when it is undefined), and a template that does not read it renders as
 * without.  Set both ways, the two must agree.  *out: NULL when there are
 * none. */
static bool template_kwargs(const cJSON *root, char **out, srv_fail *f) {
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(root, "chat_template_kwargs");
    const cJSON *effort = cJSON_GetObjectItemCaseSensitive(root, "reasoning_effort");
    if (kw && !cJSON_IsNull(kw) && !cJSON_IsObject(kw))
        return srv_bad(f, "chat_template_kwargs", "'chat_template_kwargs' must be an object");
    if (effort && !cJSON_IsNull(effort)) {
        if (!cJSON_IsString(effort) || !srv_effort_ok(effort->valuestring))
            return srv_bad(f, "reasoning_effort", "'reasoning_effort' must be one of %s", SRV_EFFORTS);
        const cJSON *set = cJSON_GetObjectItemCaseSensitive(kw, "reasoning_effort");
        if (set && !(cJSON_IsString(set) && !strcmp(set->valuestring, effort->valuestring)))
            return srv_bad(f, "reasoning_effort", "'reasoning_effort' is \"%s\" but chat_template_kwargs.reasoning_effort "
                           "differs", effort->valuestring);
    } else {
        effort = NULL;
    }
    if ((!kw || cJSON_IsNull(kw)) && !effort) return true;
    cJSON *all = kw && !cJSON_IsNull(kw) ? cJSON_Duplicate(kw, true) : cJSON_CreateObject();
    if (all && effort && !cJSON_GetObjectItemCaseSensitive(all, "reasoning_effort") &&
        !cJSON_AddStringToObject(all, "reasoning_effort", effort->valuestring)) {
        cJSON_Delete(all);
        all = NULL;
    }
    *out = all ? cJSON_PrintUnformatted(all) : NULL;
    cJSON_Delete(all);
    return *out ? true : srv_bad(f, "chat_template_kwargs", "out of memory");
}

bool srv_chat_request(const cJSON *root, srv_request *r, srv_fail *f) {
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!cJSON_IsArray(ms)) return srv_bad(f, "messages", "'messages' must be an array");
    if (!template_messages(ms, &r->messages_json, f)) return false;
    r->parallel_tool_calls = true;
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    int n_tools = 0;
    if (tools && !cJSON_IsNull(tools)) {
        if (!cJSON_IsArray(tools)) return srv_bad(f, "tools", "'tools' must be an array");
        const cJSON *t;
        cJSON_ArrayForEach(t, tools) {
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
            const cJSON *name = fn ? cJSON_GetObjectItemCaseSensitive(fn, "name") : NULL;
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
            if (!cJSON_IsObject(t) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") != 0 || !cJSON_IsObject(fn) ||
                !cJSON_IsString(name) || !name->valuestring[0])
                return srv_bad(f, "tools", "tools[%d] must be {\"type\": \"function\", \"function\": {\"name\": ..., \"parameters\": {...}}}", n_tools);
            /* OpenAI's rule: formats that write the name bare (gpt-oss's
             * to=functions.NAME, DeepSeek's) would cut or misread others */
            const char *nm = name->valuestring;
            size_t len = strlen(nm);
            if (len > 64 || strspn(nm, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != len)
                return srv_bad(f, "tools", "tools[%d].function.name '%.80s' must be 1 to 64 letters, digits, '_' or '-'", n_tools, nm);
            n_tools++;
        }
        if (n_tools && !(r->tools_json = cJSON_PrintUnformatted(tools))) return srv_bad(f, "tools", "out of memory");
    }
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    r->tool_choice = SRV_TOOLS_AUTO;
    if (tc && !cJSON_IsNull(tc)) {
        if (cJSON_IsString(tc)) {
            if (!strcmp(tc->valuestring, "auto")) r->tool_choice = SRV_TOOLS_AUTO;
            else if (!strcmp(tc->valuestring, "none")) r->tool_choice = SRV_TOOLS_NONE;
            else if (!strcmp(tc->valuestring, "required")) r->tool_choice = SRV_TOOLS_REQUIRED;
            else return srv_bad(f, "tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
        } else {
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
            const cJSON *name = fn ? cJSON_GetObjectItemCaseSensitive(fn, "name") : NULL;
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(tc, "type");
            if (!cJSON_IsObject(tc) || !cJSON_IsString(name) || !cJSON_IsString(type) ||
                strcmp(type->valuestring, "function") != 0)
                return srv_bad(f, "tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
            bool found = false;
            const cJSON *t;
            cJSON_ArrayForEach(t, tools) {
                const cJSON *tn = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"), "name");
                if (cJSON_IsString(tn) && !strcmp(tn->valuestring, name->valuestring)) found = true;
            }
            if (!found) return srv_bad(f, "tool_choice", "'tool_choice' names '%.100s', which is not in 'tools'", name->valuestring);
            r->tool_choice = SRV_TOOLS_NAMED;
            if (!(r->tool_choice_name = strdup(name->valuestring))) return srv_bad(f, "tool_choice", "out of memory");
        }
        if (r->tool_choice != SRV_TOOLS_AUTO && r->tool_choice != SRV_TOOLS_NONE && !n_tools)
            return srv_bad(f, "tool_choice", "'tool_choice' asks for a call, but 'tools' is empty");
    }
    const cJSON *ptc = cJSON_GetObjectItemCaseSensitive(root, "parallel_tool_calls");
    if (ptc && !cJSON_IsNull(ptc)) {
        if (!cJSON_IsBool(ptc)) return srv_bad(f, "parallel_tool_calls", "'parallel_tool_calls' must be true or false");
        r->parallel_tool_calls = cJSON_IsTrue(ptc);
    }
    if (!template_kwargs(root, &r->template_kwargs_json, f)) return false;
    const cJSON *agp = cJSON_GetObjectItemCaseSensitive(root, "add_generation_prompt");
    r->add_generation_prompt = true;
    if (agp && !cJSON_IsNull(agp)) {
        if (!cJSON_IsBool(agp)) return srv_bad(f, "add_generation_prompt", "'add_generation_prompt' must be true or false");
        r->add_generation_prompt = cJSON_IsTrue(agp);
    }
    /* continue_final_message: the answer goes on from the final assistant
     * turn's text (an assistant "prefill"), so no new turn is opened */
    const cJSON *cfm = cJSON_GetObjectItemCaseSensitive(root, "continue_final_message");
    if (cfm && !cJSON_IsNull(cfm)) {
        if (!cJSON_IsBool(cfm)) return srv_bad(f, "continue_final_message", "'continue_final_message' must be true or false");
        if (cJSON_IsTrue(cfm)) {
            const srv_message *last = r->n_msgs ? &r->msgs[r->n_msgs - 1] : NULL;
            if (!last || strcmp(last->role, "assistant") != 0)
                return srv_bad(f, "continue_final_message", "'continue_final_message' continues the final message, which must be "
                               "the assistant's");
            if (cJSON_IsTrue(agp))
                return srv_bad(f, "continue_final_message", "'continue_final_message' and 'add_generation_prompt' cannot both "
                               "be true: one continues the final turn, the other opens a new one");
            if (!last->content[strspn(last->content, " \t\r\n")])
                return srv_bad(f, "continue_final_message", "the final assistant message has no text to continue");
            r->add_generation_prompt = false;
            if (!(r->continue_text = strdup(last->content))) return srv_bad(f, "continue_final_message", "out of memory");
        }
    }
    return true;
}

void srv_chat_request_clear(srv_request *r) {
    free(r->messages_json);
    free(r->tools_json);
    free(r->template_kwargs_json);
    free(r->tool_choice_name);
    free(r->continue_text);
    r->messages_json = r->tools_json = r->template_kwargs_json = r->tool_choice_name = r->continue_text = NULL;
}

/* The last place n bytes of needle occur in hay[0..len), or NULL. */
static char *last_of(char *hay, size_t len, const char *needle, size_t n) {
    char *last = NULL;
    for (char *p = hay; n && (p = memmem(p, (size_t)(hay + len - p), needle, n)) != NULL; p++) last = p;
    return last;
}

/* Cuts the rendered prompt right after the last place it shows the final
 * message's text (its end-of-turn marker and whatever follows go), as
 * transformers' continue_final_message does; templates that trim messages
 * show the text trimmed, so that is looked for next.  False when the text
 * is not in the prompt. */
static bool cut_after_final(char *prompt, const char *text) {
    const size_t len = strlen(prompt);
    size_t n = strlen(text);
    char *at = last_of(prompt, len, text, n);
    if (!at) {
        const size_t a = strspn(text, " \t\r\n");
        while (n > a && strchr(" \t\r\n", text[n - 1])) n--;
        at = last_of(prompt, len, text + a, n - a);
        n -= a;
    }
    if (!at) return false;
    at[n] = '\0';
    return true;
}

char *srv_chat_render(const srv_chat *c, const srv_request *r, bool tools_turn, srv_fail *f) {
    char *with_tools = NULL;
    if (tools_turn && r->tools_json && r->tool_choice != SRV_TOOLS_NONE && !renders_tools(c) && r->messages_json &&
        !(with_tools = with_tools_turn(r->messages_json, r->tools_json, deepseek_calls(c)))) {
        srv_fail_set(f, 500, "server_error", NULL, "out of memory for the prompt");
        return NULL;
    }
    okv_chat_input in = {
        .messages_json = with_tools ? with_tools : r->messages_json ? r->messages_json : "[]",
        /* tool_choice none: the model is not offered the tools */
        .tools_json = r->tool_choice == SRV_TOOLS_NONE ? NULL : r->tools_json,
        .extra_json = r->template_kwargs_json,
        .add_generation_prompt = r->add_generation_prompt,
    };
    char *out = NULL;
    size_t n = 0;
    okv_error e;
    okv_status st = okv_chat_template_render(c->tmpl, &in, &out, &n, &e);
    bool injected = with_tools != NULL;
    free(with_tools);
    if (st != OKV_OK) {
        srv_fail_set(f, st == OKV_ERR_NOMEM ? 500 : 400, st == OKV_ERR_NOMEM ? "server_error" : "invalid_request_error",
                     "messages", "the chat template failed on this conversation%s: %s",
                     injected ? " (with the tools as a system turn: the template has no tool section)" : "", e.message);
        return NULL;
    }
    if (strlen(out) != n) {
        free(out);
        srv_fail_set(f, 400, "invalid_request_error", "messages", "the chat template rendered a NUL byte");
        return NULL;
    }
    if (r->continue_text && !cut_after_final(out, r->continue_text)) {
        free(out);
        srv_fail_set(f, 400, "invalid_request_error", "continue_final_message",
                     "the chat template does not show the final assistant message as given: it cannot be continued");
        return NULL;
    }
    return out;
}

const char *srv_chat_model_text(const srv_chat *c, const char *prompt) {
    /* The tokenizer adds BOS itself: a bos_token the template printed
     * first would make two (llama.cpp strips it the same way). */
    const char *bos = okv_chat_template_bos(c->tmpl);
    size_t n = strlen(bos);
    return c->strip_bos && n && strncmp(prompt, bos, n) == 0 ? prompt + n : prompt;
}
