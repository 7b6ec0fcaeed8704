/* The software data path's per-packet work, compiled: DATA headers built and checked,
 * payloads placed into posted buffers with one bit per packet; and the test pattern that
 * board-born data carries, made at memory speed.
 *
 * It does exactly what driver/framing.py and driver/receive_buffers.py's PythonSlots do
 * (tests/test_fastpath.py runs both on the same packets, hostile ones included); the
 * pure-Python code is used only where this extension could not be built. Header field
 * offsets and widths come from formats/rfc998.py through layout(), never typed here.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* -- the DATA/LDATA header, as formats/rfc998.py defines it ------------------------------ */

enum { F_CHECKSUM, F_VERSION, F_TYPE, F_LENGTH, F_LOCAL_PORT, F_FOREIGN_PORT, F_BUFFER,
       F_HIGH_ACK, F_PACKET, F_DATA_CHECKSUM, F_FLAGS, F_COUNT };

static struct { Py_ssize_t offset; int width; } field[F_COUNT];
static Py_ssize_t header_size;
static uint32_t version, type_data, type_ldata, flag_last;
static int configured;

static uint32_t get(const uint8_t *p, int f)
{
    const uint8_t *q = p + field[f].offset;
    uint32_t v = 0;
    for (int i = 0; i < field[f].width; i++)
        v = (v << 8) | q[i];
    return v;
}

static void put(uint8_t *p, int f, uint32_t v)
{
    uint8_t *q = p + field[f].offset;
    for (int i = field[f].width - 1; i >= 0; i--, v >>= 8)
        q[i] = (uint8_t)v;
}

/* RFC 1071's ones'-complement sum of big-endian 16-bit words (an odd last byte padded
 * with zero). Summing 32-bit words and folding gives the same sum, faster. Only an
 * all-zero buffer sums to 0; any other multiple of 0xFFFF sums to 0xFFFF. */
static uint32_t ones_sum(const uint8_t *p, Py_ssize_t n)
{
    uint64_t s = 0;
    Py_ssize_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint32_t w;
        memcpy(&w, p + i, 4);
        s += __builtin_bswap32(w);
    }
    for (; i + 2 <= n; i += 2)
        s += (uint32_t)p[i] << 8 | p[i + 1];
    if (i < n)
        s += (uint32_t)p[i] << 8;
    while (s >> 16)
        s = (s & 0xFFFF) + (s >> 16);
    return (uint32_t)s;
}

static uint32_t internet_checksum(const uint8_t *p, Py_ssize_t n)
{
    return ~ones_sum(p, n) & 0xFFFF;
}

static PyObject *layout(PyObject *self, PyObject *args)
{
    PyObject *fields;
    if (!PyArg_ParseTuple(args, "O!nIIII", &PyTuple_Type, &fields, &header_size, &version, &type_data,
                          &type_ldata, &flag_last))
        return NULL;
    if (PyTuple_GET_SIZE(fields) != F_COUNT) {
        PyErr_Format(PyExc_ValueError, "layout: %d (offset, width) pairs expected", F_COUNT);
        return NULL;
    }
    for (int f = 0; f < F_COUNT; f++) {
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(fields, f), "ni", &field[f].offset, &field[f].width))
            return NULL;
        if (field[f].width < 1 || field[f].width > 4 || field[f].offset < 0
            || field[f].offset + field[f].width > header_size) {
            PyErr_SetString(PyExc_ValueError, "layout: a field outside the header");
            return NULL;
        }
    }
    configured = 1;
    Py_RETURN_NONE;
}

/* -- the sender: packets of one buffer, back to back ---------------------------------- */

static PyObject *pack(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"out", "data", "packet_size", "first", "n", "buffer", "high_ack",
                            "last_buffer", "local_port", "foreign_port", "data_checksum", NULL};
    Py_buffer out, data;
    Py_ssize_t packet_size, first, n;
    unsigned int buffer, high_ack, local_port, foreign_port;
    int last_buffer, data_checksum;
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "layout() first");
        return NULL;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "w*y*nnnIIpIIp", names, &out, &data, &packet_size,
                                     &first, &n, &buffer, &high_ack, &last_buffer, &local_port,
                                     &foreign_port, &data_checksum))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t count = data.len ? (data.len + packet_size - 1) / packet_size : 1;
    if (packet_size < 1 || first < 0 || n < 1 || first + n > count) {
        PyErr_SetString(PyExc_ValueError, "pack: packets outside the buffer");
        goto done;
    }
    uint8_t *at = out.buf, *end = (uint8_t *)out.buf + out.len;
    Py_ssize_t segment = 0;
    for (Py_ssize_t p = first; p < first + n; p++) {
        Py_ssize_t start = p * packet_size;
        Py_ssize_t length = data.len - start < packet_size ? data.len - start : packet_size;
        Py_ssize_t padding = (4 - length % 4) % 4;
        if (end - at < header_size + length + padding) {
            PyErr_SetString(PyExc_ValueError, "pack: the output is too small");
            goto done;
        }
        const uint8_t *payload = (const uint8_t *)data.buf + start;
        memset(at, 0, header_size);
        put(at, F_VERSION, version);
        put(at, F_TYPE, p == count - 1 ? type_ldata : type_data);
        put(at, F_LENGTH, (uint32_t)(header_size + length));
        put(at, F_LOCAL_PORT, local_port);
        put(at, F_FOREIGN_PORT, foreign_port);
        put(at, F_BUFFER, buffer);
        put(at, F_HIGH_ACK, high_ack);
        put(at, F_PACKET, (uint32_t)p);
        put(at, F_DATA_CHECKSUM, data_checksum ? internet_checksum(payload, length) : 0);
        put(at, F_FLAGS, last_buffer ? flag_last : 0);
        put(at, F_CHECKSUM, internet_checksum(at, header_size));
        memcpy(at + header_size, payload, length);
        memset(at + header_size + length, 0, padding);
        if (!segment)
            segment = header_size + length + padding;
        at += header_size + length + padding;
    }
    result = Py_BuildValue("nn", (Py_ssize_t)(at - (uint8_t *)out.buf), segment);
done:
    PyBuffer_Release(&out);
    PyBuffer_Release(&data);
    return result;
}

/* -- the receiver: posted buffers ----------------------------------------------------- */

enum { D_TRUNCATED, D_VERSION, D_LENGTH, D_CHECKSUM, D_DATA_CHECKSUM, D_PORTS, D_UNKNOWN,
       D_OUTSIDE, D_DATA_LENGTH, D_PAST_LDATA, D_COUNT };
static const char *drop_reason[D_COUNT] = {
    "truncated", "version", "length", "checksum", "data checksum", "ports", "unknown buffer",
    "outside buffer", "data length", "past ldata"};

typedef struct {
    uint32_t number;
    Py_ssize_t capacity;
    PyObject *data;       /* a bytearray of buffer_size */
    uint8_t *bitmap;      /* one byte per packet */
    Py_ssize_t received, count, size, top, first_pass;  /* count -1 until the LDATA */
    int complete, queried;
    double first_at, pass_at;
    long long first_seen, pass_seen;
} Slot;

typedef struct {
    PyObject_HEAD
    Py_ssize_t packet_size, buffer_size;
    unsigned int local_port, foreign_port;
    int data_checksum;
    PyObject *first_packet, *ldata_seen, *buffer_complete, *first_pass_type;
    Slot *slots;
    Py_ssize_t used, allocated;
    long long seen, accepted, duplicates, highest_posted;
    long long drops[D_COUNT];
    unsigned int high_ack;
    double last_at;
} Slots;

static void slot_free(Slot *slot)
{
    Py_CLEAR(slot->data);
    PyMem_Free(slot->bitmap);
    slot->bitmap = NULL;
}

static Slot *find(Slots *self, uint32_t number)
{
    for (Py_ssize_t i = 0; i < self->used; i++)
        if (self->slots[i].number == number)
            return &self->slots[i];
    return NULL;
}

static int Slots_init(Slots *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"packet_size", "buffer_size", "local_port", "foreign_port", "data_checksum",
                            NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nnIIp", names, &self->packet_size, &self->buffer_size,
                                     &self->local_port, &self->foreign_port, &self->data_checksum))
        return -1;
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "layout() first");
        return -1;
    }
    if (self->packet_size < 1 || self->buffer_size < 0) {
        PyErr_SetString(PyExc_ValueError, "Slots: bad sizes");
        return -1;
    }
    PyObject *events = PyImport_ImportModule("netblt.protocol.events");
    if (!events)
        return -1;
    Py_XSETREF(self->first_packet, PyObject_GetAttrString(events, "FirstPacket"));
    Py_XSETREF(self->ldata_seen, PyObject_GetAttrString(events, "LdataSeen"));
    Py_XSETREF(self->buffer_complete, PyObject_GetAttrString(events, "BufferComplete"));
    Py_XSETREF(self->first_pass_type, PyObject_GetAttrString(events, "FirstPass"));
    Py_DECREF(events);
    return self->first_packet && self->ldata_seen && self->buffer_complete && self->first_pass_type ? 0 : -1;
}

static void Slots_dealloc(Slots *self)
{
    for (Py_ssize_t i = 0; i < self->used; i++)
        slot_free(&self->slots[i]);
    PyMem_Free(self->slots);
    Py_XDECREF(self->first_packet);
    Py_XDECREF(self->ldata_seen);
    Py_XDECREF(self->buffer_complete);
    Py_XDECREF(self->first_pass_type);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Slots_post(Slots *self, PyObject *args)
{
    unsigned int number;
    Py_ssize_t capacity;
    if (!PyArg_ParseTuple(args, "In", &number, &capacity))
        return NULL;
    if (capacity < 0) {
        PyErr_SetString(PyExc_ValueError, "post: negative capacity");
        return NULL;
    }
    Slot *slot = find(self, number);
    if (slot)
        slot_free(slot);  /* posted again: starts empty, as a new buffer */
    else {
        if (self->used == self->allocated) {
            Py_ssize_t more = self->allocated ? 2 * self->allocated : 8;
            Slot *grown = PyMem_Realloc(self->slots, more * sizeof(Slot));
            if (!grown)
                return PyErr_NoMemory();
            self->slots = grown;
            self->allocated = more;
        }
        slot = &self->slots[self->used++];
    }
    memset(slot, 0, sizeof *slot);
    slot->number = number;
    slot->capacity = capacity;
    slot->count = -1;
    slot->top = -1;
    slot->bitmap = PyMem_Calloc(capacity ? capacity : 1, 1);
    slot->data = PyByteArray_FromStringAndSize(NULL, self->buffer_size);
    if (!slot->bitmap || !slot->data) {
        slot_free(slot);
        *slot = self->slots[--self->used];
        return PyErr_NoMemory();
    }
    memset(PyByteArray_AS_STRING(slot->data), 0, self->buffer_size);
    if ((long long)number > self->highest_posted)
        self->highest_posted = number;
    Py_RETURN_NONE;
}

static PyObject *Slots_drop(Slots *self, PyObject *args)
{
    unsigned int number;
    if (!PyArg_ParseTuple(args, "I", &number))
        return NULL;
    Slot *slot = find(self, number);
    if (slot) {
        slot_free(slot);
        *slot = self->slots[--self->used];
    }
    Py_RETURN_NONE;
}

static PyObject *Slots_missing(Slots *self, PyObject *args)
{
    unsigned int number;
    if (!PyArg_ParseTuple(args, "I", &number))
        return NULL;
    Slot *slot = find(self, number);
    if (!slot || slot->complete)
        return PyTuple_New(0);
    slot->queried = 1;
    Py_ssize_t limit = slot->count >= 0 ? slot->count : slot->capacity, n = 0;
    for (Py_ssize_t p = 0; p < limit; p++)
        n += !slot->bitmap[p];
    PyObject *out = PyTuple_New(n);
    if (!out)
        return NULL;
    for (Py_ssize_t p = 0, i = 0; p < limit; p++)
        if (!slot->bitmap[p])
            PyTuple_SET_ITEM(out, i++, PyLong_FromSsize_t(p));
    return out;
}

static PyObject *Slots_take(Slots *self, PyObject *args)
{
    unsigned int number;
    if (!PyArg_ParseTuple(args, "I", &number))
        return NULL;
    Slot *slot = find(self, number);
    if (!slot) {
        PyErr_Format(PyExc_KeyError, "%u", number);
        return NULL;
    }
    PyObject *view = PyMemoryView_FromObject(slot->data);
    if (!view)
        return NULL;
    PyObject *part = PySequence_GetSlice(view, 0, slot->size);
    Py_DECREF(view);
    return part;
}

/* One DATA/LDATA packet, checked and placed; returns -1 on a Python error. The checks and
 * their order are PythonSlots.place's. */
static int place(Slots *self, const uint8_t *d, Py_ssize_t len, double now, PyObject *events)
{
    if (len < header_size)
        return self->drops[D_TRUNCATED]++, 0;
    if (get(d, F_VERSION) != version)
        return self->drops[D_VERSION]++, 0;
    Py_ssize_t length = get(d, F_LENGTH);
    if (length < header_size || length > len || len - length > 3)
        return self->drops[D_LENGTH]++, 0;
    if (internet_checksum(d, header_size) != 0)
        return self->drops[D_CHECKSUM]++, 0;
    const uint8_t *payload = d + header_size;
    Py_ssize_t size = length - header_size;
    if (self->data_checksum && internet_checksum(payload, size) != get(d, F_DATA_CHECKSUM))
        return self->drops[D_DATA_CHECKSUM]++, 0;
    if (get(d, F_FOREIGN_PORT) != self->local_port || get(d, F_LOCAL_PORT) != self->foreign_port)
        return self->drops[D_PORTS]++, 0;

    int ldata = get(d, F_TYPE) == type_ldata;
    uint32_t number = get(d, F_BUFFER), high_ack = get(d, F_HIGH_ACK);
    Py_ssize_t p = get(d, F_PACKET);
    self->last_at = now;
    self->seen++;
    if (((high_ack - self->high_ack) & 0xFFFF) < 0x8000)
        self->high_ack = high_ack;
    Slot *slot = find(self, number);
    if (!slot) {
        if ((long long)number <= self->highest_posted)
            self->duplicates++;
        else
            self->drops[D_UNKNOWN]++;
        return 0;
    }
    Py_ssize_t start = p * self->packet_size;
    if (p >= slot->capacity || start + size > self->buffer_size)
        return self->drops[D_OUTSIDE]++, 0;
    if (size != self->packet_size && !ldata)
        return self->drops[D_DATA_LENGTH]++, 0;
    if (slot->count >= 0 && (p >= slot->count || (ldata && p != slot->count - 1)))
        return self->drops[D_PAST_LDATA]++, 0;
    if (slot->bitmap[p])
        return self->duplicates++, 0;
    if (ldata)
        for (Py_ssize_t q = p + 1; q < slot->capacity; q++)
            if (slot->bitmap[q])
                return self->drops[D_PAST_LDATA]++, 0;
    memcpy(PyByteArray_AS_STRING(slot->data) + start, payload, size);
    slot->bitmap[p] = 1;
    slot->received++;
    self->accepted++;
    if (!slot->queried) {
        slot->first_pass++;  /* reordered or not: the path brought it before anything was asked for */
        if (p > slot->top) {
            if (slot->top < 0)
                slot->first_at = now, slot->first_seen = self->seen;
            slot->top = p, slot->pass_at = now, slot->pass_seen = self->seen;
        }
    }
    PyObject *event;
    if (slot->received == 1) {
        event = PyObject_CallFunction(self->first_packet, "kO", (unsigned long)number,
                                      get(d, F_FLAGS) & flag_last ? Py_True : Py_False);
        if (!event || PyList_Append(events, event) < 0)
            return Py_XDECREF(event), -1;
        Py_DECREF(event);
    }
    if (ldata) {
        slot->count = p + 1, slot->size = start + size;
        event = PyObject_CallFunction(self->ldata_seen, "kn", (unsigned long)number, slot->count);
        if (!event || PyList_Append(events, event) < 0)
            return Py_XDECREF(event), -1;
        Py_DECREF(event);
    }
    if (slot->count >= 0 && slot->received == slot->count) {
        slot->complete = 1;
        PyObject *pass = PyObject_CallFunction(self->first_pass_type, "dLn", slot->pass_at - slot->first_at,
                                               slot->pass_seen - slot->first_seen + 1,
                                               slot->count - slot->first_pass);
        if (!pass)
            return -1;
        event = PyObject_CallFunction(self->buffer_complete, "knO", (unsigned long)number, slot->size, pass);
        Py_DECREF(pass);
        if (!event || PyList_Append(events, event) < 0)
            return Py_XDECREF(event), -1;
        Py_DECREF(event);
    }
    return 0;
}

static PyObject *Slots_accept(Slots *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t segment;
    double now;
    if (!PyArg_ParseTuple(args, "y*nd", &view, &segment, &now))
        return NULL;
    PyObject *events = NULL, *others = NULL, *result = NULL;
    if (segment < 1) {
        PyErr_SetString(PyExc_ValueError, "accept: segment size below 1");
        goto done;
    }
    if (!(events = PyList_New(0)) || !(others = PyList_New(0)))
        goto done;
    const uint8_t *d = view.buf;
    for (Py_ssize_t at = 0; at < view.len; at += segment) {
        Py_ssize_t len = view.len - at < segment ? view.len - at : segment;
        uint32_t kind = len > field[F_TYPE].offset ? get(d + at, F_TYPE) : UINT32_MAX;
        if (kind != type_data && kind != type_ldata) {
            PyObject *span = Py_BuildValue("nn", at, at + len);
            if (!span || PyList_Append(others, span) < 0) {
                Py_XDECREF(span);
                goto done;
            }
            Py_DECREF(span);
        } else if (place(self, d + at, len, now, events) < 0)
            goto done;
    }
    result = PyTuple_Pack(2, events, others);
done:
    Py_XDECREF(events);
    Py_XDECREF(others);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *Slots_get_dropped(Slots *self, void *closure)
{
    PyObject *out = PyDict_New();
    for (int i = 0; out && i < D_COUNT; i++) {
        if (!self->drops[i])
            continue;
        PyObject *n = PyLong_FromLongLong(self->drops[i]);
        if (!n || PyDict_SetItemString(out, drop_reason[i], n) < 0) {
            Py_XDECREF(n);
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(n);
    }
    return out;
}

#define COUNTER(name) \
    static PyObject *Slots_get_##name(Slots *self, void *c) { return PyLong_FromLongLong(self->name); }
COUNTER(seen)
COUNTER(accepted)
COUNTER(duplicates)
COUNTER(highest_posted)
static PyObject *Slots_get_high_ack(Slots *self, void *c) { return PyLong_FromUnsignedLong(self->high_ack); }
static PyObject *Slots_get_last_at(Slots *self, void *c) { return PyFloat_FromDouble(self->last_at); }

static PyGetSetDef Slots_getset[] = {
    {"dropped", (getter)Slots_get_dropped, NULL, "Packets counted and dropped, by reason.", NULL},
    {"seen", (getter)Slots_get_seen, NULL, "DATA packets that passed the header checks.", NULL},
    {"accepted", (getter)Slots_get_accepted, NULL, "Packets placed.", NULL},
    {"duplicates", (getter)Slots_get_duplicates, NULL, "Harmless second copies.", NULL},
    {"highest_posted", (getter)Slots_get_highest_posted, NULL, NULL, NULL},
    {"high_ack", (getter)Slots_get_high_ack, NULL, "The newest high-ack seen.", NULL},
    {"last_at", (getter)Slots_get_last_at, NULL, "When the newest DATA arrived.", NULL},
    {NULL}};

static PyMethodDef Slots_methods[] = {
    {"post", (PyCFunction)Slots_post, METH_VARARGS, "post(number, capacity): an empty buffer."},
    {"drop", (PyCFunction)Slots_drop, METH_VARARGS, "drop(number): forget a buffer."},
    {"missing", (PyCFunction)Slots_missing, METH_VARARGS, "missing(number) -> packet numbers not placed."},
    {"take", (PyCFunction)Slots_take, METH_VARARGS, "take(number) -> the complete buffer's data."},
    {"accept", (PyCFunction)Slots_accept, METH_VARARGS,
     "accept(view, segment, now) -> (events, spans of the datagrams that are not DATA)."},
    {NULL}};

static PyTypeObject SlotsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "netblt.driver._fastpath.Slots",
    .tp_basicsize = sizeof(Slots),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Posted receive buffers: DATA checked and placed, one byte per packet.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Slots_init,
    .tp_dealloc = (destructor)Slots_dealloc,
    .tp_methods = Slots_methods,
    .tp_getset = Slots_getset,
};

/* -- the test pattern (formats/pattern.py): successive xorshift32 states, little-endian -- */

static PyObject *pattern(PyObject *self, PyObject *args)
{
    Py_buffer out;
    unsigned long seed;
    if (!PyArg_ParseTuple(args, "w*k", &out, &seed))
        return NULL;
    uint8_t *p = out.buf;
    uint32_t x = (uint32_t)seed;
    for (Py_ssize_t at = 0; at < out.len; at += 4) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        for (int i = 0; i < 4 && at + i < out.len; i++)
            p[at + i] = (uint8_t)(x >> (8 * i));
    }
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

/* -- the stamp source's words: first, first + every, ... as 32-bit counts, one a beat ---- */

static PyObject *stamps(PyObject *self, PyObject *args)
{
    Py_buffer out;
    unsigned long first, every;
    Py_ssize_t beat;
    if (!PyArg_ParseTuple(args, "w*kkn", &out, &first, &every, &beat))
        return NULL;
    if (beat < 4) {
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "a beat holds a 4-byte stamp at least");
        return NULL;
    }
    uint8_t *p = out.buf;
    uint32_t stamp = (uint32_t)first;
    memset(p, 0, out.len);
    for (Py_ssize_t at = 0; at < out.len; at += beat, stamp += (uint32_t)every)
        for (int i = 0; i < 4 && at + i < out.len; i++)
            p[at + i] = (uint8_t)(stamp >> (8 * i));
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"layout", layout, METH_VARARGS,
     "layout(fields, header_size, version, data, ldata, last_flag): the header, from formats/rfc998.py."},
    {"pack", (PyCFunction)(void (*)(void))pack, METH_VARARGS | METH_KEYWORDS,
     "pack(out, data, packet_size, first, n, ...) -> (bytes written, segment size)."},
    {"pattern", pattern, METH_VARARGS, "pattern(out, seed): fill out with the test pattern from seed."},
    {"stamps", stamps, METH_VARARGS, "stamps(out, first, every, beat): a stamp source's words, one a beat."},
    {NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastpath", NULL, -1, module_methods};

PyMODINIT_FUNC PyInit__fastpath(void)
{
    if (PyType_Ready(&SlotsType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddObjectRef(m, "Slots", (PyObject *)&SlotsType) < 0)
        Py_CLEAR(m);
    return m;
}
