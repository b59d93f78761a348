#define _GNU_SOURCE /* pthread_setname_np */
#include "CRoomKitShims.h"
#include <libwebsockets.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <string.h>

size_t roomkit_lws_pre(void) { return LWS_PRE; }

uint64_t roomkit_lws_options_client(void) {
    return LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
}

uint64_t roomkit_lws_options_server(int tls) {
    uint64_t o = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_FAIL_UPON_UNABLE_TO_BIND
               | LWS_SERVER_OPTION_VALIDATE_UTF8;
    if (tls)
        o |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
    return o;
}

struct ssl_ctx_st *roomkit_client_ssl_ctx_new(int trust, const char *ca_file, int *ca_loaded) {
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ca_loaded)
        *ca_loaded = 1;
    if (!ctx)
        return NULL;
    /* What lws_tls_client_create_vhost_context (lws 4.1, OpenSSL) applies;
     * per connection lws still sets peer verification, the host name check,
     * SNI and ALPN itself. */
#ifdef SSL_OP_NO_COMPRESSION
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION);
#endif
    SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
    if (!trust)
        return ctx;
    SSL_CTX_set_default_verify_paths(ctx);
    if (ca_file && !SSL_CTX_load_verify_locations(ctx, ca_file, NULL)) {
        ERR_clear_error();
        if (ca_loaded)
            *ca_loaded = 0;
    }
    return ctx;
}

void roomkit_client_ssl_ctx_free(struct ssl_ctx_st *ctx) {
    SSL_CTX_free(ctx);
}

static void (*roomkit_log_emit)(int, const char *);

static void roomkit_log_trampoline(int level, const char *line) {
    if (roomkit_log_emit)
        roomkit_log_emit(level, line);
}

void roomkit_lws_set_log(int verbose, void (*emit)(int level, const char *line)) {
    roomkit_log_emit = emit;
    int levels = LLL_ERR | LLL_WARN;
    if (verbose)
        levels |= LLL_NOTICE;
    lws_set_log_level(levels, roomkit_log_trampoline);
}

const char *roomkit_lws_http_method(struct lws *wsi) {
    if (lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0) return "GET";
    if (lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI) > 0) return "POST";
    if (lws_hdr_total_length(wsi, WSI_TOKEN_OPTIONS_URI) > 0) return "OPTIONS";
    if (lws_hdr_total_length(wsi, WSI_TOKEN_HEAD_URI) > 0) return "HEAD";
#if defined(LWS_WITH_HTTP_UNCOMMON_HEADERS) || defined(LWS_HTTP_HEADERS_ALL)
    /* PUT /v1/plugins/{name}/config (control API). */
    if (lws_hdr_total_length(wsi, WSI_TOKEN_PUT_URI) > 0) return "PUT";
    /* DELETE (the bot's DELETE /v1/fleet/rooms/{room}); lws parses it only
     * when built with uncommon headers, as Debian's is. */
    if (lws_hdr_total_length(wsi, WSI_TOKEN_DELETE_URI) > 0) return "DELETE";
#endif
    return NULL;
}

static int roomkit_copy(struct lws *wsi, enum lws_token_indexes t, char *buf, int len) {
    int total = lws_hdr_total_length(wsi, t);
    if (total <= 0) return -1;
    if (total >= len) return -1;
    if (lws_hdr_copy(wsi, buf, len, t) < 0) return -1;
    return total;
}

int roomkit_lws_http_path(struct lws *wsi, char *buf, int len) {
    static const enum lws_token_indexes uris[] = {
        WSI_TOKEN_GET_URI, WSI_TOKEN_POST_URI, WSI_TOKEN_OPTIONS_URI, WSI_TOKEN_HEAD_URI,
#if defined(LWS_WITH_HTTP_UNCOMMON_HEADERS) || defined(LWS_HTTP_HEADERS_ALL)
        WSI_TOKEN_PUT_URI,
        WSI_TOKEN_DELETE_URI,
#endif
    };
    for (size_t i = 0; i < sizeof(uris) / sizeof(uris[0]); i++) {
        int n = roomkit_copy(wsi, uris[i], buf, len);
        if (n >= 0) return n;
    }
    return -1;
}

int roomkit_lws_http_query(struct lws *wsi, char *buf, int len) {
    /* lws splits the query into fragments, one per '&'-separated argument. */
    int out = 0, frag = 0;
    if (len <= 0) return -1;
    buf[0] = '\0';
    for (;;) {
        char piece[1024];
        int n = lws_hdr_copy_fragment(wsi, piece, sizeof piece, WSI_TOKEN_HTTP_URI_ARGS, frag);
        if (n < 0) break;
        if (out + n + 2 > len) return -1;
        if (frag > 0) buf[out++] = '&';
        memcpy(buf + out, piece, (size_t)n);
        out += n;
        buf[out] = '\0';
        frag++;
    }
    return out;
}

int roomkit_lws_http_query_argument(struct lws *wsi, int index, char *buf, int len) {
    /* One '&'-separated argument, as lws stores it: already percent-decoded. */
    if (len <= 0) return -1;
    return lws_hdr_copy_fragment(wsi, buf, len, WSI_TOKEN_HTTP_URI_ARGS, index);
}

int roomkit_lws_header(struct lws *wsi, enum roomkit_header which, char *buf, int len) {
    switch (which) {
    case ROOMKIT_HEADER_AUTHORIZATION: return roomkit_copy(wsi, WSI_TOKEN_HTTP_AUTHORIZATION, buf, len);
    case ROOMKIT_HEADER_CONTENT_TYPE: return roomkit_copy(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE, buf, len);
    case ROOMKIT_HEADER_CONTENT_LENGTH: return roomkit_copy(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH, buf, len);
    case ROOMKIT_HEADER_WS_PROTOCOL: return roomkit_copy(wsi, WSI_TOKEN_PROTOCOL, buf, len);
    case ROOMKIT_HEADER_HOST: return roomkit_copy(wsi, WSI_TOKEN_HOST, buf, len);
    case ROOMKIT_HEADER_ORIGIN: return roomkit_copy(wsi, WSI_TOKEN_ORIGIN, buf, len);
    }
    return -1;
}

int roomkit_lws_write_http_head(struct lws *wsi, unsigned int status,
                                const char *content_type, int64_t content_length,
                                const char *const *names, const char *const *values,
                                int count) {
    unsigned char buf[LWS_PRE + 4096];
    unsigned char *start = buf + LWS_PRE, *p = start, *end = buf + sizeof(buf) - 1;
    lws_filepos_t clen = content_length < 0 ? LWS_ILLEGAL_HTTP_CONTENT_LEN
                                            : (lws_filepos_t)content_length;
    if (lws_add_http_common_headers(wsi, status, content_type, clen, &p, end))
        return -1;
    for (int i = 0; i < count; i++) {
        if (lws_add_http_header_by_name(wsi, (const unsigned char *)names[i],
                                        (const unsigned char *)values[i],
                                        (int)strlen(values[i]), &p, end))
            return -1;
    }
    if (lws_finalize_write_http_header(wsi, start, &p, end))
        return -1;
    return 0;
}

void roomkit_lws_close_now(struct lws *wsi) {
    /* LWS_TO_KILL_SYNC runs lws_close_free_wsi(), which sends a prepared close
     * frame; returning -1 from a WRITEABLE callback would not (lws 4.1 marks
     * the socket unusable on that path), and LWS_TO_KILL_ASYNC relies on a
     * service pass that a quiet foreign loop may never make. */
    lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_SYNC);
}

__thread void *roomkit_current_loop = NULL;

void roomkit_set_thread_name(const char *name) {
    char cut[16];
    strncpy(cut, name, sizeof cut - 1);
    cut[sizeof cut - 1] = '\0';
    pthread_setname_np(pthread_self(), cut);
}
