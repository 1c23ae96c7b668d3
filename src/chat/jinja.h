/* Internal: the Jinja interpreter behind offkv/chat.h.
 *
 * A template is lexed (lexer.c) and parsed (parser.c) once into a tree of
 * jnode; each render evaluates that tree (eval.c) over values (value.c)
 * built from the caller's JSON (json.c), with the filters, tests (filters.c)
 * and str / dict methods (methods.c) chat templates call.  The language and
 * environment are Hugging Face's apply_chat_template: jinja2's
 * ImmutableSandboxedEnvironment(trim_blocks, lstrip_blocks, loopcontrols).
 *
 * Memory: every value, node and buffer of one parse or one render comes
 * from an arena (jarena) released in one go, so a failure anywhere unwinds
 * with longjmp to the entry point (okv_jinja_fail) without leaking; the arena
 * counts its bytes against a budget so a hostile template runs out of
 * budget, not of the machine's memory. */
#ifndef OKV_CHAT_JINJA_H
#define OKV_CHAT_JINJA_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* ---- arena ---- */
typedef struct jchunk jchunk;
typedef struct jarena {
    jchunk *head;
    size_t used, budget; /* bytes handed out, and the most allowed */
} jarena;

/* A failure: the message, the template line (0: none) and whether the
 * template raised it itself (raise_exception). */
typedef struct jerror {
    char message[512];
    int line, column;
    bool raised;
} jerror;

/* Where failures go: okv_jinja_fail fills err and jumps to env. */
typedef struct jfail {
    jmp_buf env;
    jerror err;
} jfail;

void okv_jarena_init(jarena *a, size_t budget);
void okv_jarena_free(jarena *a);
/* Zeroed memory, or a jump to f when the budget or malloc runs out. */
void *okv_jalloc(jarena *a, jfail *f, size_t n);
char *okv_jstrdup(jarena *a, jfail *f, const char *s, size_t n);

_Noreturn void okv_jinja_fail(jfail *f, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- values ---- */
typedef enum jv_kind { JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_FUNC } jv_kind;

/* Flags: a list that is a tuple; a dict that is a namespace() or a loop
 * object; a string that is Markup (|safe, |escape): Markup + str escapes
 * the str, as markupsafe does even without autoescaping. */
enum { JV_F_TUPLE = 1, JV_F_NAMESPACE = 2, JV_F_LOOP = 4, JV_F_SAFE = 8 };

typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jfunc jfunc;

typedef struct jv {
    uint8_t kind, flags;
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *p;
            size_t n;
        } s;
        jlist *l;
        jdict *d;
        jfunc *fn;
    } u;
} jv;

struct jlist {
    jv *v;
    size_t n, cap;
};
struct jdict {
    jv *k, *v;
    size_t n, cap;
};

/* A growing byte string in the arena. */
typedef struct jbuf {
    char *p;
    size_t n, cap;
} jbuf;

typedef struct jctx jctx;
void okv_jbuf_put(jarena *a, jfail *f, jbuf *b, const char *s, size_t n);
void okv_jbuf_puts(jarena *a, jfail *f, jbuf *b, const char *s);
void okv_jbuf_putc(jarena *a, jfail *f, jbuf *b, char c);
void okv_jbuf_printf(jarena *a, jfail *f, jbuf *b, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

jv okv_jv_undef(void);
jv okv_jv_none(void);
jv okv_jv_bool(bool b);
jv okv_jv_int(int64_t i);
jv okv_jv_float(double f);
jv okv_jv_str(const char *p, size_t n); /* borrows p */
jv okv_jv_cstr(const char *p);
jv okv_jv_list_new(jarena *a, jfail *f, size_t cap);
jv okv_jv_dict_new(jarena *a, jfail *f, size_t cap);
void okv_jv_list_push(jarena *a, jfail *f, jv list, jv item);
/* Sets key (replacing an equal key's value in place). */
void okv_jv_dict_set(jarena *a, jfail *f, jv dict, jv key, jv val);
/* The value under a string key, or NULL. */
jv *okv_jv_dict_get(jv dict, const char *key, size_t n);
jv *okv_jv_dict_find(jv dict, jv key);

bool okv_jv_truthy(jv v);
bool okv_jv_equal(jv a, jv b);
/* -1, 0, 1; fails for values Python cannot order. */
int okv_jv_compare(jfail *f, int line, jv a, jv b);
bool okv_jv_is_number(jv v); /* int, float or bool, as Python's numbers.Number */
double okv_jv_num(jv v);
const char *okv_jv_type_name(jv v);

/* Python's str(v) and repr(v) appended to b. */
void okv_jv_str_to(jarena *a, jfail *f, jbuf *b, jv v);
void okv_jv_repr_to(jarena *a, jfail *f, jbuf *b, jv v);
/* str(v) as a string value (v itself when it is a string). */
jv okv_jv_to_str(jarena *a, jfail *f, jv v);
/* Python's repr of a float ("1.0", "1e+20", "0.1"). */
void okv_jv_float_repr(double d, char out[32]);

/* markupsafe.escape(s): & < > " ' as entities. */
jv okv_jv_html_escape(jarena *a, jfail *f, jv s);

/* Sorts idx[0..n) stably by cmp(ctx, x, y) (< 0: x first). */
void okv_jsort(jarena *a, jfail *f, size_t *idx, size_t n, int (*cmp)(void *, size_t, size_t), void *ctx);

/* UTF-8: the number of code points, and the byte offset of code point i. */
size_t okv_jinja_utf8_len(const char *p, size_t n);
size_t okv_jinja_utf8_offset(const char *p, size_t n, size_t i);

/* ---- JSON (json.c) ---- */
/* Parses JSON text into values; on a syntax error fails naming the byte
 * offset.  what names the input in messages ("messages"). */
jv okv_jinja_json_parse(jarena *a, jfail *f, const char *text, size_t n, const char *what);

typedef struct json_style {
    const char *indent; /* NULL: one line */
    const char *item_sep, *key_sep;
    bool sort_keys;
} json_style;
/* json.dumps(v, ensure_ascii=False, ...) appended to b. */
void okv_jinja_json_dump(jarena *a, jfail *f, jbuf *b, jv v, const json_style *st, int line);

/* ---- lexer and parser ---- */
typedef enum jtok_type {
    JT_TEXT,
    JT_VAR_BEGIN,
    JT_VAR_END,
    JT_BLOCK_BEGIN,
    JT_BLOCK_END,
    JT_NAME,
    JT_STRING,
    JT_INT,
    JT_FLOAT,
    JT_OP,
    JT_EOF
} jtok_type;

typedef struct jtok {
    jtok_type type;
    int line, column;
    const char *p; /* TEXT, NAME, STRING (decoded), OP */
    size_t n;
    int64_t i;
    double f;
} jtok;

/* Splits source into tokens with trim_blocks and lstrip_blocks applied. */
jtok *okv_jinja_lex(jarena *a, jfail *f, const char *src, size_t n, size_t *n_tok);

typedef enum jnode_type {
    /* expressions */
    JN_LIT,
    JN_NAME,
    JN_LIST,
    JN_TUPLE,
    JN_DICT,
    JN_ATTR,
    JN_ITEM,
    JN_SLICE,
    JN_CALL,
    JN_FILTER,
    JN_TEST,
    JN_BINOP,
    JN_NEG,
    JN_POS,
    JN_NOT,
    JN_AND,
    JN_OR,
    JN_COND,
    JN_BLOCKVAL, /* the captured body of a filter block / set block */
    /* statements */
    JN_TEXT,
    JN_OUTPUT,
    JN_IF,
    JN_FOR,
    JN_SET,
    JN_SETBLOCK,
    JN_MACRO,
    JN_CALLBLOCK,
    JN_FILTERBLOCK,
    JN_BREAK,
    JN_CONTINUE
} jnode_type;

typedef struct jnode jnode;
struct jnode {
    jnode_type type;
    int line;
    int op;          /* JN_BINOP: a JOP_*; JN_TEST: negated */
    jv lit;          /* JN_LIT value; JN_NAME/ATTR/FILTER/TEST/MACRO name; JN_TEXT text */
    jnode *a, *b, *c, *d;
    jnode **args;    /* positional args, list items, dict keys, body */
    int n_args;
    jnode **kwvals;  /* kwarg values, dict values, else-body, param defaults */
    int n_kw;
    const char **kwnames; /* kwarg names, param names, for / set targets */
    int n_names;
};

enum { JOP_ADD, JOP_SUB, JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD, JOP_POW, JOP_CONCAT,
       JOP_EQ, JOP_NE, JOP_LT, JOP_LE, JOP_GT, JOP_GE, JOP_IN, JOP_NOTIN };

/* The template's statements, or a jump to f naming the line and column. */
void okv_jinja_parse(jarena *a, jfail *f, const jtok *toks, size_t n_tok, int *n_body, jnode ***body);

/* ---- evaluation ---- */
typedef struct jscope jscope;
struct jscope {
    jscope *parent;
    const char **names;
    jv *vals;
    size_t n, cap;
};

typedef struct jlimits {
    size_t max_output;     /* bytes of rendered text */
    size_t max_iterations; /* loop iterations, all loops together */
    int max_depth;         /* nested macro calls and expression depth */
} jlimits;

struct jctx {
    jarena *a;
    jfail *f;
    jlimits lim;
    size_t iterations;
    int depth;
    jscope *globals;
    jbuf *out;
    size_t out_total;
    const struct tm *now; /* strftime_now's time */
    int brk;              /* a pending break (1) or continue (2) */
    jv blockval;          /* the captured body a filter block's chain reads */
    int nesting;          /* evaluation recursion, bounded by MAX_EVAL_NESTING */
    double deadline;      /* CLOCK_MONOTONIC seconds after which the render fails */
    double max_seconds;
    size_t ticks, next_check;
};

/* Counts a unit of work; every so often compares the clock with the
 * deadline.  Loops count against max_iterations; work inside one loop step
 * (filters over long lists, string methods, membership scans) is bounded
 * by memory, and the clock bounds how many steps of it a template runs. */
void okv_jinja_tick(jctx *c, int line);
/* n units of work at once (the items a filter walks, bytes / 256 of text
 * built), so that one heavy step cannot run long between looks at the clock. */
void okv_jinja_tick_n(jctx *c, int line, size_t n);

enum { MAX_EVAL_NESTING = 3000 };

struct jfunc {
    int kind;          /* JF_MACRO, JF_BUILTIN, JF_METHOD */
    const char *name;
    jnode *macro;      /* JF_MACRO */
    jscope *closure;
    jnode *caller_body; /* JF_MACRO used as caller(): its body is the call block's */
    jv self;           /* JF_METHOD: the object */
    int builtin;       /* JF_BUILTIN id */
};
enum { JF_MACRO, JF_BUILTIN, JF_METHOD };

/* Renders body into out (arena buffer). */
void okv_jinja_render(jctx *c, jnode **body, int n_body, jscope *root);

jv okv_jinja_eval(jctx *c, jscope *s, jnode *e);
void okv_jscope_set(jctx *c, jscope *s, const char *name, jv v);

/* Calls a callable value with evaluated arguments. */
jv okv_jinja_call_value(jctx *c, jv fn, int line, jv *args, int n_args, const char **kwn, jv *kwv, int n_kw);

/* filters.c: a filter / test by name; fails on an unknown one. */
jv okv_jinja_filter(jctx *c, jscope *s, const char *name, int line, jv v, jv *args, int n_args, const char **kwn, jv *kwv,
                int n_kw);
bool okv_jinja_test(jctx *c, const char *name, int line, jv v, jv *args, int n_args);

/* Python's printf-style fmt % args (%s, %r, %d, %i, %f, %%). */
jv okv_jinja_printf(jctx *c, int line, jv fmt, jv *args, int n_args);

/* methods.c: obj.name as a bound method value (JV_UNDEF when obj has none),
 * and calling it. */
jv okv_jinja_method(jctx *c, jv obj, const char *name);
jv okv_jinja_call_method(jctx *c, jfunc *m, int line, jv *args, int n_args, const char **kwn, jv *kwv, int n_kw);

/* A keyword argument by name, or the positional one at pos, or def. */
jv okv_jarg(jv *args, int n_args, int pos, const char **kwn, jv *kwv, int n_kw, const char *name, jv def);

/* Iteration as Python's iter(v): the items of a list, the keys of a dict,
 * the characters of a string, nothing for undefined; fails otherwise. */
jv okv_jinja_iterable(jctx *c, int line, jv v);

#endif
