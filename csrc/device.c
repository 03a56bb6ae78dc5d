/* csrc/device.c — device names: parsing "cpu" / "meta" / "cuda:N" and writing them back. The bottom of the C core
 * (it uses nothing else in csrc/): the allocator, the CUDA layer and every error message name devices. */
#include "gm.h"

const char *gm_device_str(gm_device dev, char *buf) {
    if (dev.type == GM_DEV_CPU) strcpy(buf, "cpu");
    else if (dev.type == GM_DEV_META) strcpy(buf, "meta");
    else snprintf(buf, 16, "cuda:%d", dev.index);
    return buf;
}

/* The thread's current CUDA device: what a bare "cuda" names (torch.cuda.set_device; per thread, as the CUDA
 * runtime's current device is). */
static _Thread_local int current_cuda;

int gm_current_cuda_index(void) { return current_cuda; }

void gm_set_current_cuda_index(int i) { current_cuda = i; }

int gm_parse_device(PyObject *obj, gm_device *dev, const char *argname) {
    PyObject *str = PyObject_Str(obj);
    if (!str) return -1;
    const char *s = PyUnicode_AsUTF8(str);
    int ok = 1;
    if (!s) { Py_DECREF(str); return -1; }
    if (strcmp(s, "cpu") == 0) *dev = (gm_device){GM_DEV_CPU, 0};
    else if (strcmp(s, "meta") == 0) *dev = (gm_device){GM_DEV_META, 0};
    else if (strcmp(s, "cuda") == 0) *dev = (gm_device){GM_DEV_CUDA, current_cuda};
    else if (strncmp(s, "cuda:", 5) == 0) {
        char *end;
        long idx = strtol(s + 5, &end, 10);
        ok = *end == '\0' && end != s + 5 && idx >= 0 && idx < GM_MAX_CUDA_DEVICES;
        *dev = (gm_device){GM_DEV_CUDA, (int)idx};
    } else ok = 0;
    if (!ok)
        PyErr_Format(PyExc_ValueError, "%s: unknown device %R; expected 'cpu', 'meta', 'cuda' or 'cuda:N'",
                     argname, str);
    Py_DECREF(str);
    return ok ? 0 : -1;
}
