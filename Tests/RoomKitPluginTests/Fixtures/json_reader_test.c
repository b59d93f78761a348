/* Unit and fuzz-ish tests of roomkit_json.h, run by JSONReaderTests.
 * Prints one line per failed check and exits 1 if any failed. */
#include "roomkit_json.h"
#include <stdio.h>

static int failures, checks;
#define CHECK(cond) do { checks++; if (!(cond)) { failures++; printf("FAIL line %d: %s\n", __LINE__, #cond); } } while (0)

static const char *doc =
    " { \"event\" : \"command\", \"from\": 7, \"neg\": -9223372036854775808, \"big\": 9223372036854775808,"
    " \"f\": 2.5e1, \"t\": true, \"no\": false, \"nil\": null,"
    " \"payload\": {\"text\": \"!p\\u00e9\\ud83d\\ude00\\n\\\"q\\\"\", \"deep\": {\"a\": [10, [20, 30], {\"b\": \"x\"}]}},"
    " \"empty\": {}, \"arr\": [], \"esc\\\"key\": 1, \"dup\": 1, \"dup\": 2 } ";

int main(void) {
    char buf[128];
    int64_t i = 0;
    double d = 0;
    int b = -1;
    const char *v;
    size_t n;

    CHECK(roomkit_json_string(doc, "event", buf, sizeof buf) == 7 && strcmp(buf, "command") == 0);
    CHECK(roomkit_json_int(doc, "from", &i) == 0 && i == 7);
    CHECK(roomkit_json_int(doc, "neg", &i) == 0 && i == INT64_MIN);
    CHECK(roomkit_json_int(doc, "big", &i) == ROOMKIT_JSON_WRONG_TYPE);
    CHECK(roomkit_json_int(doc, "f", &i) == ROOMKIT_JSON_WRONG_TYPE);
    CHECK(roomkit_json_number(doc, "f", &d) == 0 && d == 25.0);
    CHECK(roomkit_json_bool(doc, "t", &b) == 0 && b == 1);
    CHECK(roomkit_json_bool(doc, "no", &b) == 0 && b == 0);
    CHECK(roomkit_json_bool(doc, "nil", &b) == ROOMKIT_JSON_WRONG_TYPE);
    CHECK(roomkit_json_string(doc, "from", buf, sizeof buf) == ROOMKIT_JSON_WRONG_TYPE);
    /* escapes: \u00e9 -> 2 bytes, surrogate pair -> 4 bytes, \n, \" */
    CHECK(roomkit_json_string(doc, "payload.text", buf, sizeof buf) == 2 + 2 + 4 + 1 + 3);
    CHECK(strcmp(buf, "!p\xc3\xa9\xf0\x9f\x98\x80\n\"q\"") == 0);
    CHECK(roomkit_json_string_equals(doc, "event", "command") == 1);
    CHECK(roomkit_json_string_equals(doc, "event", "comman") == 0);
    CHECK(roomkit_json_string_equals(doc, "event", "commands") == 0);
    CHECK(roomkit_json_int(doc, "payload.deep.a[0]", &i) == 0 && i == 10);
    CHECK(roomkit_json_int(doc, "payload.deep.a[1][1]", &i) == 0 && i == 30);
    CHECK(roomkit_json_string(doc, "payload.deep.a[2].b", buf, sizeof buf) == 1 && strcmp(buf, "x") == 0);
    CHECK(roomkit_json_int(doc, "payload.deep.a[3]", &i) == ROOMKIT_JSON_NOT_FOUND);
    CHECK(roomkit_json_int(doc, "arr[0]", &i) == ROOMKIT_JSON_NOT_FOUND);
    CHECK(roomkit_json_raw(doc, "payload.deep", buf, sizeof buf) > 0 && strcmp(buf, "{\"a\": [10, [20, 30], {\"b\": \"x\"}]}") == 0);
    CHECK(roomkit_json_raw(doc, "empty", buf, sizeof buf) == 2 && strcmp(buf, "{}") == 0);
    CHECK(roomkit_json_raw(doc, "payload", buf, 4) == ROOMKIT_JSON_TOO_SMALL && buf[0] == '\0');
    CHECK(roomkit_json_find(doc, "", &v, &n) == 0 && *v == '{');
    CHECK(roomkit_json_int(doc, "dup", &i) == 0 && i == 1); /* first occurrence */
    CHECK(roomkit_json_int(doc, "missing", &i) == ROOMKIT_JSON_NOT_FOUND);
    CHECK(roomkit_json_int(doc, "from.x", &i) == ROOMKIT_JSON_NOT_FOUND);
    CHECK(roomkit_json_int(doc, "from[0]", &i) == ROOMKIT_JSON_NOT_FOUND);
    CHECK(roomkit_json_int(doc, "payload..text", &i) == ROOMKIT_JSON_INVALID);
    CHECK(roomkit_json_int(doc, "arr[x]", &i) == ROOMKIT_JSON_INVALID);
    CHECK(roomkit_json_int(doc, "arr[-1]", &i) == ROOMKIT_JSON_INVALID);
    /* A key that only prefixes another does not match. */
    CHECK(roomkit_json_int("{\"fromage\":1,\"from\":2}", "from", &i) == 0 && i == 2);
    /* Truncation cuts at a character boundary and reports TOO_SMALL. */
    CHECK(roomkit_json_string(doc, "payload.text", buf, 5) == ROOMKIT_JSON_TOO_SMALL && strcmp(buf, "!p\xc3\xa9") == 0);
    CHECK(roomkit_json_string(doc, "payload.text", buf, 4) == ROOMKIT_JSON_TOO_SMALL && strcmp(buf, "!p") == 0);
    /* A lone surrogate becomes U+FFFD; \u0000 cuts the string. */
    CHECK(roomkit_json_string("{\"s\":\"a\\ud800b\"}", "s", buf, sizeof buf) == 5 && strcmp(buf, "a\xef\xbf\xbd" "b") == 0);
    CHECK(roomkit_json_string("{\"s\":\"a\\u0000b\"}", "s", buf, sizeof buf) == 1);
    /* Malformed documents fail as a whole, whatever the path. */
    const char *bad[] = {"", "{", "{\"a\":}", "{\"a\" 1}", "{\"a\":1,}", "[1,]", "{\"a\":tru}", "{\"a\":01}",
                         "{\"a\":1.}", "{\"a\":\"\\x\"}", "{\"a\":\"\\u12\"}", "{\"a\":\"tab\there\"}", "{\"a\":1} x",
                         "{a:1}", "{\"a\":-}", "{\"a\":1e}", "nul"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        CHECK(roomkit_json_int(bad[k], "a", &i) == ROOMKIT_JSON_INVALID);
    }
    /* Nesting deeper than ROOMKIT_JSON_MAX_DEPTH is refused, not recursed into. */
    static char deep[200000];
    size_t at = 0;
    for (int k = 0; k < 90000; k++) deep[at++] = '[';
    deep[at] = '\0';
    CHECK(roomkit_json_find(deep, "", &v, &n) == ROOMKIT_JSON_INVALID);
    /* quote round-trips through the reader. */
    char quoted[128], doc2[160];
    CHECK(roomkit_json_quote("a\"b\\c\n\x01", quoted, sizeof quoted) > 0);
    snprintf(doc2, sizeof doc2, "{\"k\":%s}", quoted);
    CHECK(roomkit_json_string(doc2, "k", buf, sizeof buf) == 7 && strcmp(buf, "a\"b\\c\n\x01") == 0);
    CHECK(roomkit_json_quote("abc", quoted, 5) == ROOMKIT_JSON_TOO_SMALL && quoted[0] == '\0');

    /* Fuzz-ish: every prefix of the document, and 20000 seeded mutations of
     * it, must be read without a crash or an out-of-bounds read (the test
     * builds this with AddressSanitizer when it can), and every prefix is
     * malformed. */
    size_t length = strlen(doc);
    static char copy[1024];
    for (size_t cut = 0; cut + 1 < length; cut++) {
        memcpy(copy, doc, cut);
        copy[cut] = '\0';
        int rc = roomkit_json_string(copy, "payload.text", buf, sizeof buf);
        if (cut < length - 2) CHECK(rc == ROOMKIT_JSON_INVALID);
    }
    uint32_t seed = 12345;
    const char alphabet[] = "{}[]\":,\\u0123456789.eE+-tfnrl \x80\xff";
    for (int round = 0; round < 20000; round++) {
        memcpy(copy, doc, length + 1);
        for (int m = 0; m < 1 + round % 4; m++) {
            seed = seed * 1103515245u + 12345u;
            size_t pos = (seed >> 8) % length;
            seed = seed * 1103515245u + 12345u;
            copy[pos] = alphabet[(seed >> 8) % (sizeof alphabet - 1)];
        }
        (void)roomkit_json_string(copy, "payload.text", buf, sizeof buf);
        (void)roomkit_json_int(copy, "payload.deep.a[1][1]", &i);
        (void)roomkit_json_raw(copy, "payload", buf, sizeof buf);
        (void)roomkit_json_bool(copy, "t", &b);
    }
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
