/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tool.h"

/* `airlock-tool connect HOST PORT`: a byte pipe from stdin and stdout to
 * HOST:PORT through the network gate's CONNECT listener (127.0.0.1:3128),
 * for clients that take a command instead of a proxy, such as ssh's
 * ProxyCommand (GIT_SSH_COMMAND). The gate decides, resolves, checks and
 * audits the connection as any other; a refusal prints its reason. */

#define GATE_PORT 3128
#define HEAD_MAX  8192

static int gate_connect(const char *host, const char *port)
{
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons(GATE_PORT),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                fprintf(stderr,
                        "airlock-tool: connecting to the network gate at 127.0.0.1:%d: %s\n",
                        GATE_PORT, strerror(errno));
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        char req[600];
        bool v6 = strchr(host, ':') != NULL;
        int n = snprintf(req, sizeof(req), "CONNECT %s%s%s:%s HTTP/1.1\r\nHost: %s%s%s:%s\r\n\r\n",
                         v6 ? "[" : "", host, v6 ? "]" : "", port, v6 ? "[" : "", host,
                         v6 ? "]" : "", port);
        if (n < 0 || (size_t)n >= sizeof(req) || write(fd, req, (size_t)n) != n) {
                fprintf(stderr, "airlock-tool: writing to the network gate failed\n");
                close(fd);
                return -1;
        }
        /* The answer's head, byte by byte: what follows it is the
         * upstream's and goes to stdout. */
        char head[HEAD_MAX + 1];
        size_t len = 0;
        while (len < HEAD_MAX) {
                ssize_t r = read(fd, head + len, 1);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        break;
                len++;
                if (len >= 4 && memcmp(head + len - 4, "\r\n\r\n", 4) == 0)
                        break;
        }
        head[len] = '\0';
        if (len < 12 || strncmp(head, "HTTP/1.", 7) != 0 || strncmp(head + 8, " 200", 4) != 0) {
                const char *why = strcasestr(head, "\nX-Airlock-Denied:");
                if (!why)
                        why = strcasestr(head, "\nX-Airlock-Error:");
                size_t line = strcspn(head, "\r\n");
                fprintf(stderr, "airlock-tool: the network gate refused %s:%s: %.*s%s%.*s\n", host,
                        port, (int)(line < 100 ? line : 100), head, why ? " (" : "",
                        why ? (int)strcspn(why + 1, "\r\n") : 0, why ? why + 1 : "");
                close(fd);
                return -1;
        }
        return fd;
}

int tool_connect_main(int argc, char **argv)
{
        unsigned long port = 0;
        if (argc == 2 && argv[1][0] && strlen(argv[1]) <= 5 &&
            strspn(argv[1], "0123456789") == strlen(argv[1]))
                port = strtoul(argv[1], NULL, 10);
        if (argc != 2 || !argv[0][0] || strlen(argv[0]) > 253 || port < 1 || port > 65535) {
                fprintf(stderr, "airlock-tool: usage: airlock-tool connect HOST PORT\n");
                return TOOL_EXIT_USAGE;
        }
        for (const char *c = argv[0]; *c; c++)
                if (*c <= 0x20 || *c >= 0x7f || *c == '/' || *c == '@') {
                        fprintf(stderr, "airlock-tool: connect: not a host name: %s\n", argv[0]);
                        return TOOL_EXIT_USAGE;
                }
        int fd = gate_connect(argv[0], argv[1]);
        if (fd < 0)
                return TOOL_EXIT_CLIENT;
        struct pollfd p[2] = {{.fd = STDIN_FILENO, .events = POLLIN}, {.fd = fd, .events = POLLIN}};
        char buf[65536];
        bool in_open = true;
        for (;;) {
                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (in_open && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
                        ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
                        if (n <= 0) {
                                in_open = false;
                                p[0].fd = -1;
                                shutdown(fd, SHUT_WR);
                        } else if (write(fd, buf, (size_t)n) != n)
                                break;
                }
                if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
                        ssize_t n = read(fd, buf, sizeof(buf));
                        if (n <= 0)
                                break;
                        for (ssize_t o = 0; o < n;) {
                                ssize_t w = write(STDOUT_FILENO, buf + o, (size_t)(n - o));
                                if (w < 0 && errno == EINTR)
                                        continue;
                                if (w <= 0) {
                                        close(fd);
                                        return TOOL_EXIT_CLIENT;
                                }
                                o += w;
                        }
                }
        }
        close(fd);
        return 0;
}
