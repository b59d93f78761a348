/*
 * roomkit_json.h: a small, header-only JSON reader for RoomKit plugins
 * written in C, so nobody has to take payloads apart with strstr.
 *
 * It reads a value by path out of a NUL-terminated JSON text without
 * allocating and without building a tree. A path is a sequence of object
 * keys and array indexes: "payload.text", "users[0].id", "[2]", "" (the
 * whole text). A key containing '.', '[' or ']' cannot be named by a path.
 *
 *     char text[64];
 *     if (roomkit_json_string(payload_json, "payload.text", text, sizeof text) >= 0) ...
 *     int64_t from;
 *     if (roomkit_json_int(payload_json, "from", &from) == 0) ...
 *
 * Every function validates the whole value it walks through (malformed JSON
 * fails rather than being half-read), nests at most ROOMKIT_JSON_MAX_DEPTH
 * deep, and never reads past the terminating NUL. Return values: 0 (or a
 * length >= 0) on success, ROOMKIT_JSON_NOT_FOUND when the path does not
 * exist, ROOMKIT_JSON_WRONG_TYPE when the value there is of another type,
 * ROOMKIT_JSON_INVALID for malformed JSON or a malformed path, and
 * ROOMKIT_JSON_TOO_SMALL when the output buffer is too small (it then holds
 * a NUL-terminated prefix cut at a UTF-8 character boundary).
 *
 * The functions are static: include this header in each file that uses it.
 * It needs only the C standard library (C99).
 */
#ifndef ROOMKIT_JSON_H
#define ROOMKIT_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ROOMKIT_JSON_NOT_FOUND (-1)
#define ROOMKIT_JSON_WRONG_TYPE (-2)
#define ROOMKIT_JSON_INVALID (-3)
#define ROOMKIT_JSON_TOO_SMALL (-4)
#ifndef ROOMKIT_JSON_MAX_DEPTH
#define ROOMKIT_JSON_MAX_DEPTH 64
#endif

#if defined(__GNUC__) || defined(__clang__)
#define ROOMKIT_JSON_UNUSED __attribute__((unused))
#else
#define ROOMKIT_JSON_UNUSED
#endif

static const char *roomkit_json__ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

static int roomkit_json__hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Past the string starting at p (on its opening quote); NULL if malformed. */
static const char *roomkit_json__skip_string(const char *p) {
    if (*p != '"') return NULL;
    for (p++;; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"') return p + 1;
        if (c < 0x20) return NULL; /* control characters (and the NUL) are not allowed */
        if (c == '\\') {
            p++;
            switch (*p) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't': break;
            case 'u':
                for (int i = 1; i <= 4; i++) if (roomkit_json__hex(p[i]) < 0) return NULL;
                p += 4;
                break;
            default: return NULL;
            }
        }
    }
}

static const char *roomkit_json__skip_number(const char *p) {
    if (*p == '-') p++;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') while (*p >= '0' && *p <= '9') p++;
    else return NULL;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9')) return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    return p;
}

/* Past the value starting at p (no leading whitespace); NULL if malformed. */
static const char *roomkit_json__skip(const char *p, int depth) {
    if (depth > ROOMKIT_JSON_MAX_DEPTH) return NULL;
    switch (*p) {
    case '"': return roomkit_json__skip_string(p);
    case 't': return strncmp(p, "true", 4) == 0 ? p + 4 : NULL;
    case 'f': return strncmp(p, "false", 5) == 0 ? p + 5 : NULL;
    case 'n': return strncmp(p, "null", 4) == 0 ? p + 4 : NULL;
    case '{': case '[': {
        char close = *p == '{' ? '}' : ']';
        int object = *p == '{';
        p = roomkit_json__ws(p + 1);
        if (*p == close) return p + 1;
        for (;;) {
            if (object) {
                p = roomkit_json__skip_string(p);
                if (!p) return NULL;
                p = roomkit_json__ws(p);
                if (*p != ':') return NULL;
                p = roomkit_json__ws(p + 1);
            }
            p = roomkit_json__skip(p, depth + 1);
            if (!p) return NULL;
            p = roomkit_json__ws(p);
            if (*p == close) return p + 1;
            if (*p != ',') return NULL;
            p = roomkit_json__ws(p + 1);
        }
    }
    default: return roomkit_json__skip_number(p);
    }
}

/* Whether the JSON string at s (on its quote) equals the raw key [key, key+n). */
static int roomkit_json__key_equals(const char *s, const char *end, const char *key, size_t n) {
    /* Keys with escapes are compared escaped; a path cannot name them anyway. */
    return (size_t)(end - s - 2) == n && strncmp(s + 1, key, n) == 0;
}

/**
 * Finds the value at path. On success returns 0 and sets *value to its first
 * character and *length to its length in bytes (the raw JSON text of the
 * value: an object or array comes out whole, a string with its quotes).
 */
static ROOMKIT_JSON_UNUSED int roomkit_json_find(const char *json, const char *path, const char **value, size_t *length) {
    if (!json || !path) return ROOMKIT_JSON_INVALID;
    const char *p = roomkit_json__ws(json);
    const char *whole_end = roomkit_json__skip(p, 0);
    if (!whole_end || *roomkit_json__ws(whole_end) != '\0') return ROOMKIT_JSON_INVALID;
    const char *q = path;
    while (*q) {
        if (*q == '.') q++;
        if (*q == '[') {
            char *after;
            long index = strtol(q + 1, &after, 10);
            if (after == q + 1 || *after != ']' || index < 0) return ROOMKIT_JSON_INVALID;
            q = after + 1;
            if (*p != '[') return ROOMKIT_JSON_NOT_FOUND;
            p = roomkit_json__ws(p + 1);
            if (*p == ']') return ROOMKIT_JSON_NOT_FOUND;
            for (long i = 0;; i++) {
                if (i == index) break;
                p = roomkit_json__ws(roomkit_json__skip(p, 1));
                if (*p != ',') return ROOMKIT_JSON_NOT_FOUND;
                p = roomkit_json__ws(p + 1);
            }
        } else {
            size_t n = strcspn(q, ".[");
            if (n == 0) return ROOMKIT_JSON_INVALID;
            const char *key = q;
            q += n;
            if (*p != '{') return ROOMKIT_JSON_NOT_FOUND;
            p = roomkit_json__ws(p + 1);
            int found = 0;
            while (*p == '"') {
                const char *key_end = roomkit_json__skip_string(p);
                int match = roomkit_json__key_equals(p, key_end, key, n);
                p = roomkit_json__ws(roomkit_json__ws(key_end) + 1); /* past ':' */
                if (match) { found = 1; break; }
                p = roomkit_json__ws(roomkit_json__skip(p, 1));
                if (*p != ',') break;
                p = roomkit_json__ws(p + 1);
            }
            if (!found) return ROOMKIT_JSON_NOT_FOUND;
        }
    }
    /* The text was validated as a whole above, so every skip here succeeds. */
    const char *end = roomkit_json__skip(p, 0);
    *value = p;
    *length = (size_t)(end - p);
    return 0;
}

/* Appends the code point cp as UTF-8 at out[*n] if it fits in cap - 1. */
static int roomkit_json__put(char *out, size_t cap, size_t *n, uint32_t cp) {
    char buf[4];
    size_t len;
    if (cp < 0x80) { buf[0] = (char)cp; len = 1; }
    else if (cp < 0x800) { buf[0] = (char)(0xC0 | (cp >> 6)); buf[1] = (char)(0x80 | (cp & 0x3F)); len = 2; }
    else if (cp < 0x10000) {
        buf[0] = (char)(0xE0 | (cp >> 12)); buf[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        buf[2] = (char)(0x80 | (cp & 0x3F)); len = 3;
    } else {
        buf[0] = (char)(0xF0 | (cp >> 18)); buf[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        buf[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); buf[3] = (char)(0x80 | (cp & 0x3F)); len = 4;
    }
    if (*n + len + 1 > cap) return 0;
    memcpy(out + *n, buf, len);
    *n += len;
    return 1;
}

/**
 * Copies the string at path into out (cap bytes, NUL-terminated), decoding
 * escapes (\uXXXX and surrogate pairs to UTF-8; a lone surrogate becomes
 * U+FFFD). Returns the decoded length in bytes, or an error (negative).
 * A string containing \u0000 is cut there.
 */
static ROOMKIT_JSON_UNUSED int roomkit_json_string(const char *json, const char *path, char *out, size_t cap) {
    const char *v;
    size_t len;
    int rc = roomkit_json_find(json, path, &v, &len);
    if (rc != 0) return rc;
    if (*v != '"') return ROOMKIT_JSON_WRONG_TYPE;
    if (!out || cap == 0) return ROOMKIT_JSON_TOO_SMALL;
    size_t n = 0;
    const char *end = v + len - 1;
    for (const char *p = v + 1; p < end; p++) {
        uint32_t cp;
        if (*p != '\\') {
            /* Copy one whole UTF-8 sequence, so a cut never splits a character. */
            unsigned char c = (unsigned char)*p;
            size_t seq = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
            if (p + seq > end) seq = (size_t)(end - p);
            if (n + seq + 1 > cap) { out[n] = '\0'; return ROOMKIT_JSON_TOO_SMALL; }
            memcpy(out + n, p, seq);
            n += seq;
            p += seq - 1;
            continue;
        }
        p++;
        switch (*p) {
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u': {
            cp = 0;
            for (int i = 1; i <= 4; i++) cp = cp * 16 + (uint32_t)roomkit_json__hex(p[i]);
            p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && p[1] == '\\' && p[2] == 'u') {
                uint32_t low = 0;
                int ok = 1;
                for (int i = 3; i <= 6; i++) {
                    int h = roomkit_json__hex(p[i]);
                    if (h < 0) { ok = 0; break; }
                    low = low * 16 + (uint32_t)h;
                }
                if (ok && low >= 0xDC00 && low <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                    p += 6;
                }
            }
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
            if (cp == 0) { out[n] = '\0'; return (int)n; }
            break;
        }
        default: cp = (unsigned char)*p; break; /* " \ / */
        }
        if (!roomkit_json__put(out, cap, &n, cp)) { out[n] = '\0'; return ROOMKIT_JSON_TOO_SMALL; }
    }
    out[n] = '\0';
    return (int)n;
}

/** Whether the value at path is the string text (compared after decoding). 1 or 0. */
static ROOMKIT_JSON_UNUSED int roomkit_json_string_equals(const char *json, const char *path, const char *text) {
    size_t want = strlen(text);
    char small[256];
    char *buffer = want + 2 <= sizeof small ? small : (char *)malloc(want + 2);
    if (!buffer) return 0;
    int n = roomkit_json_string(json, path, buffer, want + 2);
    int equal = n >= 0 && (size_t)n == want && memcmp(buffer, text, want) == 0;
    if (buffer != small) free(buffer);
    return equal;
}

/** Reads the number at path as a double. */
static ROOMKIT_JSON_UNUSED int roomkit_json_number(const char *json, const char *path, double *out) {
    const char *v;
    size_t len;
    int rc = roomkit_json_find(json, path, &v, &len);
    if (rc != 0) return rc;
    if (!(*v == '-' || (*v >= '0' && *v <= '9'))) return ROOMKIT_JSON_WRONG_TYPE;
    *out = strtod(v, NULL);
    return 0;
}

/** Reads the number at path as an integer: WRONG_TYPE when it has a fraction,
 *  an exponent, or does not fit in int64_t. */
static ROOMKIT_JSON_UNUSED int roomkit_json_int(const char *json, const char *path, int64_t *out) {
    const char *v;
    size_t len;
    int rc = roomkit_json_find(json, path, &v, &len);
    if (rc != 0) return rc;
    if (!(*v == '-' || (*v >= '0' && *v <= '9'))) return ROOMKIT_JSON_WRONG_TYPE;
    for (size_t i = 0; i < len; i++) if (v[i] == '.' || v[i] == 'e' || v[i] == 'E') return ROOMKIT_JSON_WRONG_TYPE;
    int negative = *v == '-';
    uint64_t magnitude = 0;
    for (size_t i = (size_t)negative; i < len; i++) {
        uint64_t digit = (uint64_t)(v[i] - '0');
        if (magnitude > (UINT64_MAX - digit) / 10) return ROOMKIT_JSON_WRONG_TYPE;
        magnitude = magnitude * 10 + digit;
    }
    if (negative ? magnitude > (uint64_t)INT64_MAX + 1 : magnitude > (uint64_t)INT64_MAX) return ROOMKIT_JSON_WRONG_TYPE;
    *out = negative ? (int64_t)(0 - magnitude) : (int64_t)magnitude;
    return 0;
}

/** Reads the boolean at path (1 or 0 into *out). */
static ROOMKIT_JSON_UNUSED int roomkit_json_bool(const char *json, const char *path, int *out) {
    const char *v;
    size_t len;
    int rc = roomkit_json_find(json, path, &v, &len);
    if (rc != 0) return rc;
    if (*v == 't') { *out = 1; return 0; }
    if (*v == 'f') { *out = 0; return 0; }
    return ROOMKIT_JSON_WRONG_TYPE;
}

/** Copies the raw JSON text of the value at path (an object, array, or any
 *  other value) into out, NUL-terminated. Returns its length, or an error;
 *  TOO_SMALL leaves out empty (a cut JSON text would not parse). */
static ROOMKIT_JSON_UNUSED int roomkit_json_raw(const char *json, const char *path, char *out, size_t cap) {
    const char *v;
    size_t len;
    int rc = roomkit_json_find(json, path, &v, &len);
    if (rc != 0) return rc;
    if (!out || len + 1 > cap) { if (out && cap) out[0] = '\0'; return ROOMKIT_JSON_TOO_SMALL; }
    memcpy(out, v, len);
    out[len] = '\0';
    return (int)len;
}

/** Writes text as a JSON string literal (with quotes) into out, for building
 *  replies. Returns the length, or TOO_SMALL (out then empty). */
static ROOMKIT_JSON_UNUSED int roomkit_json_quote(const char *text, char *out, size_t cap) {
    size_t n = 0;
    if (!out || cap < 3) { if (out && cap) out[0] = '\0'; return ROOMKIT_JSON_TOO_SMALL; }
    out[n++] = '"';
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        char escape[7];
        size_t len = 0;
        switch (*p) {
        case '"': memcpy(escape, "\\\"", 2); len = 2; break;
        case '\\': memcpy(escape, "\\\\", 2); len = 2; break;
        case '\n': memcpy(escape, "\\n", 2); len = 2; break;
        case '\r': memcpy(escape, "\\r", 2); len = 2; break;
        case '\t': memcpy(escape, "\\t", 2); len = 2; break;
        default:
            if (*p < 0x20) {
                static const char digits[] = "0123456789abcdef";
                memcpy(escape, "\\u00", 4);
                escape[4] = digits[*p >> 4];
                escape[5] = digits[*p & 15];
                len = 6;
            } else {
                escape[0] = (char)*p;
                len = 1;
            }
        }
        if (n + len + 2 > cap) { out[0] = '\0'; return ROOMKIT_JSON_TOO_SMALL; }
        memcpy(out + n, escape, len);
        n += len;
    }
    out[n++] = '"';
    out[n] = '\0';
    return (int)n;
}

#ifdef __cplusplus
}
#endif

#endif /* ROOMKIT_JSON_H */
