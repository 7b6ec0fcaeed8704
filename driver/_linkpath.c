/* The host link's bulk path in C: a whole UPLOAD or DOWNLOAD run with no Python per datagram.
 *
 * driver/link.py keeps the protocol (docs/host-link.md); this runs its common case, a run of
 * equal requests into or out of slot memory, up to the window in flight, batched system
 * calls both ways (an upload's datagrams cut by the kernel, UDP segmentation offload), one
 * REGISTERS request before them (the reads that go with a download: a buffer's steps in
 * one run, in the order the board runs them) and one after them (the SEND that follows an
 * upload: its reply says the whole run ran, one wake for both). A DOWNLOAD asks for its words in several
 * reply datagrams, the request done when each has come. An upload asks for a reply from one request
 * in half a window and the last of each batch (QUIET on the rest): the board runs
 * requests in ID order, so a reply says the quiet ones before it ran. A run told to ``leave``
 * that fits its window goes out whole and QUIET (the first request too where it only
 * writes), and a later datagram's ``ack`` says it ran (the push of the slot's SENT event,
 * or any push or reply after the requests ran): the run waits ``patience`` for one, or
 * for any push (the host has work then), and leaves to link.py what is still unanswered,
 * so a buffer's upload and SEND wake the host for no reply of their own. Replies to the run are
 * matched here; the board's event pushes that are
 * next in sequence are held (and acknowledged in the following requests). Anything else
 * goes back to link.py: replies to requests still in flight when the run began, pushes
 * out of sequence; a status that is not OK, or a reply of another kind than its request's,
 * also ends the run, as a silence longer than the retry time does, and link.py's recovery
 * (STATUS, RESEND) takes over the rest. The slowest round trip of the run's requests goes to link.py's retry timer. The
 * header's layout comes from formats/host_link.py through layout(). */

#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE
#include <Python.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

enum { H_VERSION, H_TYPE, H_STATUS, H_FLAGS, H_ID, H_ACK, H_SESSION, H_VALUE, H_COUNT };
static struct { Py_ssize_t offset; int width; } field[H_COUNT];
static Py_ssize_t header_size;
static uint32_t version, reply_bit, type_events, type_registers, type_upload, type_download, status_ok, flag_quiet;
static int configured;

#define BATCH 64
#define MAX_DATAGRAM 65536
#define GSO_SEGMENTS 64  /* the kernel's limits (UDP_MAX_SEGMENTS; a datagram's 64 KiB), as transport.py's */
#define GSO_BYTES 65000
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

static uint32_t get(const uint8_t *d, int f)
{
    uint32_t v = 0;
    for (int i = 0; i < field[f].width; i++)
        v = v << 8 | d[field[f].offset + i];
    return v;
}

static void put(uint8_t *d, int f, uint32_t v)
{
    for (int i = field[f].width - 1; i >= 0; i--, v >>= 8)
        d[field[f].offset + i] = (uint8_t)v;
}

static PyObject *layout(PyObject *self, PyObject *args)
{
    PyObject *fields;
    if (!PyArg_ParseTuple(args, "O!nIIIIIIII", &PyTuple_Type, &fields, &header_size, &version, &reply_bit,
                          &type_events, &type_registers, &type_upload, &type_download, &status_ok, &flag_quiet))
        return NULL;
    if (PyTuple_GET_SIZE(fields) != H_COUNT || header_size < 1 || header_size > 64) {
        PyErr_Format(PyExc_ValueError, "layout: %d (offset, width) pairs and a header of 1..64 bytes", H_COUNT);
        return NULL;
    }
    for (int f = 0; f < H_COUNT; f++) {
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(fields, f), "ni", &field[f].offset, &field[f].width))
            return NULL;
        if (field[f].width < 1 || field[f].width > 4 || field[f].offset + field[f].width > header_size) {
            PyErr_SetString(PyExc_ValueError, "layout: a field outside the header");
            return NULL;
        }
    }
    configured = 1;
    Py_RETURN_NONE;
}

/* One run's state. */
typedef struct {
    int fd, kind, offload;  /* offload: the socket takes segmentation offload */
    uint32_t session, held, first_id, word_address;
    uint32_t acked;  /* the push acknowledged by the last request sent */
    Py_ssize_t count, window, step, words;  /* requests; in flight at most; words a datagram; words in all */
    Py_ssize_t parts, stride;  /* a DOWNLOAD's reply datagrams, and the words it reads (the last: fewer) */
    uint64_t *got;  /* each DOWNLOAD's replies come, a bit each */
    uint8_t *data;
    Py_ssize_t size;
    Py_buffer first;  /* the REGISTERS request's body before the data's requests, if len > 0 */
    Py_ssize_t lead;  /* 1 with it (request 0), else 0: the data's request j is request j + lead */
    PyObject *first_reply;  /* its reply, once answered */
    Py_buffer last;  /* the REGISTERS request's body after the data's requests, if len > 0 */
    Py_ssize_t tail;  /* 1 with it (the run's last request), else 0 */
    PyObject *last_reply;
    char *done, *quiet;  /* each request answered; each sent QUIET */
    int leave;  /* LEAVE_*: the run may end with QUIET requests in flight */
    int patience_ms;  /* how long it then waits for a datagram whose ack answers them */
    int heard;  /* a push came since every request was sent, or that wait ended */
    uint32_t board_ack;  /* the furthest ``ack`` the board sent (the next ID it expects) */
    int ack_seen;
    double *sent_at, now, slowest;  /* when each request went; the last receive's time; the slowest round trip */
    Py_ssize_t oldest, next;  /* the oldest request not answered; the next to send */
    Py_ssize_t loud_every;  /* an upload asks for its reply one in this many (and each batch's last) */
    long long bytes_out, bytes_in, sent;
    uint8_t *out;  /* datagrams being built: a window of them, end to end, then the REGISTERS requests' */
    Py_ssize_t room;  /* bytes each in out: the longest of the data's requests */
    Py_ssize_t extra;  /* bytes for each REGISTERS request after them */
    PyObject *others, *pushes;
    const char *stopped;
} Run;

enum { LEAVE_TAIL = 1, LEAVE_FIRST = 2 };  /* the uploads and the last request; the first too */

/* time.monotonic()'s clock. */
static double monotonic(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Words the data's request ``i`` moves. */
static Py_ssize_t request_words(Run *r, Py_ssize_t i)
{
    Py_ssize_t left = r->words - i * r->stride;
    return left < r->stride ? left : r->stride;
}

static void put_word(uint8_t *w, uint32_t v)
{
    w[0] = (uint8_t)(v >> 24), w[1] = (uint8_t)(v >> 16), w[2] = (uint8_t)(v >> 8), w[3] = (uint8_t)v;
}

/* Request ``i`` is the REGISTERS request after the data's. */
static int is_last(Run *r, Py_ssize_t i)
{
    return r->tail && i == r->count - 1;
}

/* Where request ``i`` is built: the data's in a ring of a window, the REGISTERS requests in
 * places of their own after it. */
static uint8_t *place(Run *r, Py_ssize_t i)
{
    uint8_t *own = r->out + r->window * r->room;
    return i < r->lead ? own : is_last(r, i) ? own + r->extra : r->out + i % r->window * r->room;
}

/* Request ``i``: its header, and any body but slot data, into ``d``; the datagram as the
 * pieces it goes out in (``piece``: the header, then an UPLOAD's words where they lie in the
 * caller's buffer, and zeros for a last word the data does not fill); how many. */
static int build(Run *r, Py_ssize_t i, uint8_t *d, struct iovec *piece)
{
    static uint8_t zeros[4];
    memset(d, 0, header_size);
    put(d, H_VERSION, version);
    put(d, H_ID, (r->first_id + (uint32_t)i) & 0xFFFF);
    put(d, H_ACK, r->held);
    put(d, H_SESSION, r->session);
    piece[0].iov_base = d;
    if (i < r->lead || is_last(r, i)) {  /* a REGISTERS request before or after the data */
        Py_buffer *body = i < r->lead ? &r->first : &r->last;
        put(d, H_TYPE, type_registers);
        memcpy(d + header_size, body->buf, body->len);
        piece[0].iov_len = (size_t)(header_size + body->len);
        return 1;
    }
    i -= r->lead;
    Py_ssize_t words = request_words(r, i);
    put(d, H_TYPE, (uint32_t)r->kind);
    put(d, H_VALUE, r->word_address + (uint32_t)(i * r->stride));
    if (r->kind == (int)type_upload && (i + 1) % r->loud_every && i + r->lead + 1 < r->count)
        put(d, H_FLAGS, flag_quiet);  /* a later reply says it ran */
    if (r->kind == (int)type_upload) {  /* the words go from where they are: no copy of ours */
        Py_ssize_t at = 4 * i * r->stride, have = r->size - at < 4 * words ? r->size - at : 4 * words;
        piece[0].iov_len = (size_t)header_size;
        piece[1].iov_base = r->data + at, piece[1].iov_len = (size_t)have;
        piece[2].iov_base = zeros, piece[2].iov_len = (size_t)(4 * words - have);
        return have < 4 * words ? 3 : 2;
    }
    put_word(d + header_size, (uint32_t)words);
    piece[0].iov_len = (size_t)header_size + 4;
    if (words > r->step) {  /* in several replies (formats/host_link.py download_body) */
        put_word(d + header_size + 4, (uint32_t)r->step);
        piece[0].iov_len += 4;
    }
    return 1;
}

/* Datagrams all one size but the last (which may be shorter) go as one message that the
 * kernel cuts into them (UDP segmentation offload) where the socket allows: the upload's
 * datagrams cross the kernel once a group, not once each. */
static int group(Run *r, size_t *len, int n, int k)
{
    size_t total = len[k];
    int end = k + 1;
    while (r->offload && end < n && end - k < GSO_SEGMENTS && len[end - 1] == len[k] && len[end] <= len[k]
           && total + len[end] <= GSO_BYTES)
        total += len[end++];
    return end;
}

static int send_window(Run *r)
{
    struct mmsghdr msgs[BATCH];
    struct iovec iov[3 * BATCH];
    union { char buf[CMSG_SPACE(sizeof(uint16_t))]; struct cmsghdr align; } control[BATCH];
    uint8_t *at[BATCH];
    size_t len[BATCH], mlen[BATCH];
    int pieces[BATCH + 1];  /* where each datagram's pieces start in iov */
    int n = 0;
    pieces[0] = 0;
    while (r->next < r->count && r->next - r->oldest < r->window && n < BATCH) {
        at[n] = place(r, r->next);
        int count = build(r, r->next, at[n], &iov[pieces[n]]);
        len[n] = 0;
        for (int j = 0; j < count; j++)
            len[n] += iov[pieces[n] + j].iov_len;
        pieces[n + 1] = pieces[n] + count;
        n++, r->next++;
    }
    if (n && (r->leave & LEAVE_TAIL) && r->next == r->count && r->next - n == r->oldest) {
        for (int k = 0; k < n; k++)  /* the whole run at once: answered by a later datagram's ack */
            put(at[k], H_FLAGS, r->next - n + k >= r->lead || (r->leave & LEAVE_FIRST) ? flag_quiet : 0);
    } else if (n) {
        put(at[n - 1], H_FLAGS, 0);  /* each batch's last is answered: the run never waits on silence */
    }
    if (n)
        r->acked = r->held;
    for (int k = 0; k < n; k++)
        r->quiet[r->next - n + k] = (get(at[k], H_FLAGS) & flag_quiet) != 0;
    double now = monotonic();
    for (Py_ssize_t i = r->next - n; i < r->next; i++)
        r->sent_at[i] = now;
    for (int k = 0; k < n;) {
        int m = 0, first = k;
        for (; k < n; m++) {
            int end = group(r, len, n, k);
            memset(&msgs[m], 0, sizeof msgs[m]);
            msgs[m].msg_hdr.msg_iov = &iov[pieces[k]];
            msgs[m].msg_hdr.msg_iovlen = (size_t)(pieces[end] - pieces[k]);
            mlen[m] = 0;
            for (int j = k; j < end; j++)
                mlen[m] += len[j];
            if (end - k > 1) {
                msgs[m].msg_hdr.msg_control = control[m].buf;
                msgs[m].msg_hdr.msg_controllen = sizeof control[m].buf;
                struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[m].msg_hdr);
                c->cmsg_level = IPPROTO_UDP, c->cmsg_type = UDP_SEGMENT, c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
                uint16_t size = (uint16_t)len[k];
                memcpy(CMSG_DATA(c), &size, sizeof size);
            }
            k = end;
        }
        int sent = sendmmsg(r->fd, msgs, (unsigned)m, MSG_DONTWAIT);
        if (sent < 0 && r->offload && (errno == EIO || errno == EINVAL || errno == EOPNOTSUPP)) {
            r->offload = 0;  /* no segmentation offload on this path: a message a datagram */
            k = first;
            continue;
        }
        if (sent < 0 && (errno == EAGAIN || errno == ENOBUFS))
            break;  /* no room: as good as lost, the retry recovers it */
        if (sent < 0) {
            PyErr_SetFromErrno(PyExc_OSError);  /* ConnectionRefusedError: nothing listens */
            return -1;
        }
        for (int j = 0; j < sent; j++)
            r->bytes_out += (long long)mlen[j];
        if (sent < m)
            break;  /* the socket filled: the rest as good as lost */
    }
    r->sent += n;
    return 0;
}

/* A reply of the run's types: 0 taken (or a late copy, ignored); 1 hand it back and stop (a
 * status that is not OK, a type that is not its request's, or a download's words that are
 * not the request's); -1 an error set. */
static int answer(Run *r, const uint8_t *d, Py_ssize_t len)
{
    Py_ssize_t i = (Py_ssize_t)((get(d, H_ID) - r->first_id) & 0xFFFF);
    if (i < r->oldest || i >= r->next || r->done[i])
        return 0;
    if (get(d, H_STATUS) != status_ok)
        return 1;
    if (i < r->lead || is_last(r, i)) {
        PyObject **reply = i < r->lead ? &r->first_reply : &r->last_reply;
        if (get(d, H_TYPE) != (type_registers | reply_bit))
            return 1;
        *reply = PyBytes_FromStringAndSize((const char *)d, len);
        if (!*reply)
            return -1;
    } else if (get(d, H_TYPE) != ((uint32_t)r->kind | reply_bit)) {
        return 1;
    } else if (r->kind == (int)type_download) {
        /* One of its replies: the words from its value on, a part of the request's. */
        Py_ssize_t j = i - r->lead, words = request_words(r, j), base = j * r->stride;
        Py_ssize_t part = (Py_ssize_t)((get(d, H_VALUE) - r->word_address - (uint32_t)base) & 0xFFFFFFFF);
        Py_ssize_t parts = (words + r->step - 1) / r->step, size = words < r->step ? words : r->step;
        if (part % r->step || part / r->step >= (parts ? parts : 1))
            return 1;
        if (words - part < size)
            size = words - part;
        if (len - header_size != 4 * size)
            return 1;
        Py_ssize_t at = 4 * (base + part), have = r->size - at < 4 * size ? r->size - at : 4 * size;
        memcpy(r->data + at, d + header_size, have);
        r->got[j] |= (uint64_t)1 << (part / r->step);
        if (parts > 1 && r->got[j] != (parts == 64 ? ~(uint64_t)0 : ((uint64_t)1 << parts) - 1))
            return 0;  /* more to come */
    }
    r->done[i] = 1;
    if (r->now - r->sent_at[i] > r->slowest)
        r->slowest = r->now - r->sent_at[i];
    for (Py_ssize_t j = r->lead; r->kind == (int)type_upload && j < i; j++)
        r->done[j] = 1;  /* the board runs requests in ID order: the quiet ones before this ran */
    while (r->oldest < r->next && r->done[r->oldest])
        r->oldest++;
    return 0;
}

static int hand_back(Run *r, const uint8_t *d, Py_ssize_t len, int stop)
{
    PyObject *copy = PyBytes_FromStringAndSize((const char *)d, len);
    if (!copy || PyList_Append(r->others, copy) < 0)
        return Py_XDECREF(copy), -1;
    Py_DECREF(copy);
    if (stop)
        r->stopped = "handed back";
    return 0;
}

/* The board expects ``ack`` next, so it ran the requests before it: the QUIET ones are
 * answered (a reply's or a push's ``ack`` is their answer). */
static void ran_before(Run *r, uint32_t ack)
{
    Py_ssize_t upto = (Py_ssize_t)((ack - r->first_id) & 0xFFFF);
    if (upto > r->next)
        return;  /* from before the run */
    for (Py_ssize_t i = r->oldest; i < upto; i++)
        if (r->quiet[i])
            r->done[i] = 1;
    while (r->oldest < r->next && r->done[r->oldest])
        r->oldest++;
}

/* One datagram from the board. Another session's (a reset board answers with none) stops
 * the run; a push out of sequence or another request's reply goes to link.py, which
 * knows what to do with it. */
static int take(Run *r, const uint8_t *d, Py_ssize_t len)
{
    if (len < header_size || get(d, H_VERSION) != version)
        return 0;  /* link.py drops these too */
    if (get(d, H_SESSION) != r->session)
        return hand_back(r, d, len, 1);
    uint32_t ack = get(d, H_ACK);
    if (!r->ack_seen || (uint32_t)((ack - r->board_ack) & 0xFFFF) - 1 < 0x7FFF)
        r->board_ack = ack, r->ack_seen = 1;  /* the furthest in 16-bit serial order */
    ran_before(r, ack);
    uint32_t type = get(d, H_TYPE), id = get(d, H_ID);
    int mine = ((id - r->first_id) & 0xFFFF) < (uint32_t)r->count;  /* not a request's sent before the run */
    if (mine && (type == ((uint32_t)r->kind | reply_bit) || ((r->lead || r->tail) && type == (type_registers | reply_bit)))) {
        int answered = answer(r, d, len);
        return answered > 0 ? hand_back(r, d, len, 1) : answered;
    }
    if (type == type_events && id == ((r->held + 1) & 0xFFFF)) {
        PyObject *body = PyBytes_FromStringAndSize((const char *)d + header_size, len - header_size);
        if (!body || PyList_Append(r->pushes, body) < 0)
            return Py_XDECREF(body), -1;
        Py_DECREF(body);
        r->held = (r->held + 1) & 0xFFFF;
        r->heard = r->next == r->count;  /* the host has work now: it waits no longer */
        return 0;
    }
    if (type == type_events && id == r->held)
        return 0;  /* again: its acknowledgement goes with the next request */
    return hand_back(r, d, len, 0);
}

/* The size of each datagram a coalesced read joined (the socket's UDP_GRO), or 0. */
static size_t coalesced_size(struct msghdr *h)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c))
        if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO && c->cmsg_len >= CMSG_LEN(sizeof(int))) {
            int size;
            memcpy(&size, CMSG_DATA(c), sizeof size);
            return size > 0 ? (size_t)size : 0;
        }
    return 0;
}

static int receive(Run *r, uint8_t *space)
{
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } control[BATCH];
    for (int k = 0; k < BATCH; k++) {
        iov[k].iov_base = space + (Py_ssize_t)k * MAX_DATAGRAM;
        iov[k].iov_len = MAX_DATAGRAM;
        memset(&msgs[k], 0, sizeof msgs[k]);
        msgs[k].msg_hdr.msg_iov = &iov[k];
        msgs[k].msg_hdr.msg_iovlen = 1;
        msgs[k].msg_hdr.msg_control = control[k].buf;
        msgs[k].msg_hdr.msg_controllen = sizeof control[k].buf;
    }
    int got = recvmmsg(r->fd, msgs, BATCH, MSG_DONTWAIT, NULL);
    if (got < 0) {
        if (errno == EAGAIN)
            return 0;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    r->now = monotonic();
    for (int k = 0; k < got; k++) {
        /* A coalesced read holds several datagrams of one size (the last may be shorter),
         * each taken as it was sent. */
        uint8_t *d = space + (Py_ssize_t)k * MAX_DATAGRAM;
        size_t len = msgs[k].msg_len, size = coalesced_size(&msgs[k].msg_hdr), at = 0;
        if (!size)
            size = len ? len : 1;
        r->bytes_in += len;
        do {
            size_t one = len - at < size ? len - at : size;
            if (take(r, d + at, (Py_ssize_t)one) < 0)
                return -1;
            at += one;
        } while (at < len);
    }
    return got;
}

/* Leaving, every request is sent and those not QUIET are answered: the run waits only for
 * word of the QUIET ones. */
static int leaving(Run *r)
{
    if (!(r->leave & LEAVE_TAIL) || r->next < r->count)
        return 0;
    for (Py_ssize_t i = r->oldest; i < r->next; i++)
        if (!r->done[i] && !r->quiet[i])
            return 0;
    return 1;
}

/* Every request is answered; or, leaving, a push came (the host has work) or the patience
 * passed: the QUIET ones stay in flight, for link.py. */
static int finished(Run *r)
{
    return r->oldest >= r->count || (leaving(r) && (r->heard || r->patience_ms <= 0));
}

static int go(Run *r, int timeout_ms)
{
    uint8_t *space = PyMem_Malloc((size_t)BATCH * MAX_DATAGRAM);
    if (!space)
        return PyErr_NoMemory(), -1;
    int result = 0;
    while (!finished(r) && !r->stopped && result >= 0) {
        if ((result = send_window(r)) < 0 || finished(r))
            break;
        struct pollfd p = {r->fd, POLLIN, 0};
        int ready, quiet = leaving(r);
        Py_BEGIN_ALLOW_THREADS  /* a board simulated in this process answers meanwhile */
        ready = poll(&p, 1, quiet ? r->patience_ms : timeout_ms);
        Py_END_ALLOW_THREADS
        if (ready == 0 && quiet)
            r->heard = 1;  /* not yet: link.py's client waits for it */
        else if (ready == 0)
            r->stopped = "timeout";
        else if (ready < 0 && errno != EINTR) {
            PyErr_SetFromErrno(PyExc_OSError);
            result = -1;
        } else if (PyErr_CheckSignals() < 0)
            result = -1;
        /* Until a read finds fewer than it has room for: one more would only say EAGAIN (a
         * system call a wake), and the poll before the next wait sees anything later. */
        while (result >= 0 && !r->stopped && (result = receive(r, space)) == BATCH)
            ;
    }
    PyMem_Free(space);
    return result < 0 ? -1 : 0;
}

static PyObject *bulk(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"fd", "kind", "session", "held", "first_id", "window", "word_address", "data",
                            "step", "timeout", "first", "offload", "parts", "last", "leave", "patience", NULL};
    Run r;
    memset(&r, 0, sizeof r);
    Py_buffer view;
    PyObject *data, *first = NULL, *last = NULL;
    double timeout, patience = 0;
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "layout() first");
        return NULL;
    }
    r.offload = 1, r.parts = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iiIIInIOnd|OpnOid", names, &r.fd, &r.kind, &r.session, &r.held,
                                     &r.first_id, &r.window, &r.word_address, &data, &r.step, &timeout, &first,
                                     &r.offload, &r.parts, &last, &r.leave, &patience))
        return NULL;
    if (PyObject_GetBuffer(data, &view, r.kind == (int)type_download ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
        return NULL;  /* a download needs somewhere to write */
    if (first && first != Py_None && PyObject_GetBuffer(first, &r.first, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (last && last != Py_None && PyObject_GetBuffer(last, &r.last, PyBUF_SIMPLE) < 0) {
        if (r.first.obj)
            PyBuffer_Release(&r.first);
        PyBuffer_Release(&view);
        return NULL;
    }
    PyObject *result = NULL;
    r.data = view.buf, r.size = view.len;
    r.words = (view.len + 3) / 4;
    r.lead = r.first.len > 0, r.tail = r.last.len > 0;
    r.loud_every = r.window / 2 > 1 ? r.window / 2 : 1;  /* each reply a wake: a quarter window cost twice the CPU */
    if (r.kind != (int)type_download)
        r.parts = 1;
    r.stride = r.step * r.parts;
    r.count = (r.stride > 0 ? (r.words + r.stride - 1) / r.stride : 0) + r.lead + r.tail;
    if ((r.kind != (int)type_upload && r.kind != (int)type_download) || r.window < 1 || r.step < 1
        || r.parts < 1 || r.parts > 64 || r.stride > 0xFFFF || header_size + 4 * r.step > MAX_DATAGRAM
        || r.first.len > 4 * r.step || r.last.len > 4 * r.step || r.count > 0x4000 || r.window > 0x4000) {
        PyErr_SetString(PyExc_ValueError, "bulk: a kind of UPLOAD or DOWNLOAD, a window, a step, 1 to 64 parts, "
                                          "requests first and last no longer than one of the data's, and at most "
                                          "16384 requests (their IDs must not wrap)");
        goto done;
    }
    r.done = PyMem_Calloc(r.count ? r.count : 1, 1);
    r.quiet = PyMem_Calloc(r.count ? r.count : 1, 1);
    r.got = PyMem_Calloc(r.count ? r.count : 1, sizeof(uint64_t));
    r.sent_at = PyMem_Calloc(r.count ? r.count : 1, sizeof(double));
    r.room = header_size + 8;  /* an UPLOAD's words are not copied here */
    r.extra = header_size + 4 * r.step;
    r.out = PyMem_Malloc((size_t)r.window * r.room + 2 * (size_t)r.extra);
    r.others = PyList_New(0), r.pushes = PyList_New(0);
    if (!r.done || !r.quiet || !r.got || !r.sent_at || !r.out || !r.others || !r.pushes) {
        PyErr_NoMemory();
        goto done;
    }
    r.patience_ms = patience > 0 ? (int)(patience * 1000) + 1 : 0;
    if (go(&r, (int)(timeout * 1000) + 1) < 0)
        goto done;
    PyObject *waiting = PyList_New(0);  /* sent, not answered: (index, id, when sent, QUIET) */
    for (Py_ssize_t i = r.oldest; waiting && i < r.next; i++) {
        if (r.done[i])
            continue;
        PyObject *pair = Py_BuildValue("nIdO", i, (r.first_id + (uint32_t)i) & 0xFFFF, r.sent_at[i],
                                       r.quiet[i] ? Py_True : Py_False);
        if (!pair || PyList_Append(waiting, pair) < 0)
            Py_CLEAR(waiting);
        Py_XDECREF(pair);
    }
    if (waiting)
        result = Py_BuildValue("{s:n,s:n,s:N,s:O,s:O,s:I,s:I,s:L,s:L,s:z,s:O,s:O,s:d,s:O,s:N}", "count", r.count, "next",
                               r.next, "waiting", waiting, "others", r.others, "pushes", r.pushes, "held", r.held,
                               "acked", r.acked, "bytes_out", r.bytes_out, "bytes_in", r.bytes_in,
                               "stopped", r.stopped, "first", r.first_reply ? r.first_reply : Py_None,
                               "offload", r.offload ? Py_True : Py_False, "slowest", r.slowest,
                               "last", r.last_reply ? r.last_reply : Py_None,
                               "ack", r.ack_seen ? PyLong_FromUnsignedLong(r.board_ack) : Py_NewRef(Py_None));
done:
    Py_XDECREF(r.first_reply);
    Py_XDECREF(r.last_reply);
    if (r.first.obj)
        PyBuffer_Release(&r.first);
    if (r.last.obj)
        PyBuffer_Release(&r.last);
    PyMem_Free(r.done);
    PyMem_Free(r.quiet);
    PyMem_Free(r.got);
    PyMem_Free(r.sent_at);
    PyMem_Free(r.out);
    Py_XDECREF(r.others);
    Py_XDECREF(r.pushes);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"layout", layout, METH_VARARGS,
     "layout(fields, header_size, version, reply_bit, type_events, status_ok): the header's layout."},
    {"bulk", (PyCFunction)(void (*)(void))bulk, METH_VARARGS | METH_KEYWORDS,
     "bulk(fd, kind, session, held, first_id, window, word_address, data, step, timeout, first=None, offload=True, "
     "parts=1, last=None, leave=0, patience=0) -> dict: a REGISTERS request with the body first, then a run of "
     "UPLOADs of data or DOWNLOADs into it (each in ``parts`` replies of ``step`` words), then one with the body "
     "last, until every one is answered (with ``leave``, 1 or 3, a run that fits its window goes QUIET, the first "
     "request too with 3, until a push comes, an ack answers it, or ``patience`` seconds pass) or the link needs "
     "link.py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_linkpath", NULL, -1, methods};

PyMODINIT_FUNC PyInit__linkpath(void)
{
    return PyModule_Create(&module);
}
