/*
 * libwebsockets' own HTTP error answers, in RoomKit's JSON error shape
 * (issue #27 §2; docs/PROTOCOL.md "HTTP: room IDs and numbers").
 *
 * libwebsockets answers some requests itself, before any callback of ours
 * runs: most visibly a request line with a bad percent-escape (`%zz`, a
 * lone `%`) or a control byte, which its URI parser refuses with
 * `lws_return_http_status(wsi, 403, NULL)` ("forbidding on uri
 * sanitation", lib/roles/http/parsers.c, lws 4.1). That function writes an
 * HTML page, with no hook to change it, so every RoomKit HTTP error but
 * these was `{"code","message"}` JSON.
 *
 * libwebsockets calls the function through its PLT (checked with objdump on
 * Debian's libwebsockets.so.17: every call is `lws_return_http_status@plt`,
 * the library has no -Bsymbolic), so the definition below, exported by the
 * executable that links this module, is the one those calls reach. It
 * builds the same response with libwebsockets' public header API (no HTTP
 * is written by hand) and a JSON body:
 *
 *   - 403 from libwebsockets (only the URI parser sends it; roomd's own 403s
 *     go through its responder, not here) becomes 400
 *     `{"code":1009001,"message":"malformed request URI (…)"}`;
 *   - any other status keeps its number, with `{"code":1009001}` for 4xx
 *     and `{"code":1009500}` for 5xx, and libwebsockets' text as message.
 */
#include "CRoomKitShims.h"
#include <libwebsockets.h>
#include <stdio.h>
#include <string.h>

int lws_return_http_status(struct lws *wsi, unsigned int code, const char *html_body) {
    unsigned char buffer[LWS_PRE + 2048];
    unsigned char *start = buffer + LWS_PRE, *p = start, *end = buffer + sizeof buffer;
    char body[700];
    const char *message;
    unsigned int status = code, protocol_code = code >= 500 ? 1009500 : 1009001;

    if (code == HTTP_STATUS_FORBIDDEN) {
        status = HTTP_STATUS_BAD_REQUEST;
        message = "malformed request URI (a bad percent-escape such as %zz or a lone %)";
    } else if (html_body && *html_body) {
        message = html_body;
    } else {
        message = code >= 500 ? "server error" : "request refused";
    }
    /* The message is ours or libwebsockets' fixed text: no quote or
     * backslash to escape except in a caller's html_body, which we drop
     * when it has one. */
    if (strpbrk(message, "\"\\<>\r\n"))
        message = code >= 500 ? "server error" : "request refused";
    int length = snprintf(body, sizeof body, "{\"code\":%u,\"message\":\"%s\"}", protocol_code, message);
    if (length < 0 || (size_t)length >= sizeof body)
        return 1;

    if (lws_add_http_header_status(wsi, status, &p, end)
        || lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE,
                                        (const unsigned char *)"application/json", 16, &p, end)
        || lws_add_http_header_content_length(wsi, (lws_filepos_t)length, &p, end)
        || lws_finalize_http_header(wsi, &p, end))
        return 1;
    if (end - p < length)
        return 1;
    memcpy(p, body, (size_t)length);
    p += length;
    int n = (int)(p - start);
    return lws_write(wsi, start, (size_t)n, LWS_WRITE_HTTP_HEADERS) != n;
}
