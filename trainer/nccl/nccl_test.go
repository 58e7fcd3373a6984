package nccl

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/loaderd/loaderd/trainer/cuda/driver"
	"github.com/loaderd/loaderd/trainer/parallel"
	"github.com/loaderd/loaderd/trainer/tensor"
)

func TestLoadMissing(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "libnccl.so.2"))
	if !errors.Is(err, ErrNotFound) || !strings.HasPrefix(err.Error(), "nccl: ") {
		t.Fatalf("got %v, want an nccl: error wrapping ErrNotFound", err)
	}
	if _, err := os.Stat("/lib/x86_64-linux-gnu/libc.so.6"); err == nil {
		_, err := Load("/lib/x86_64-linux-gnu/libc.so.6")
		if !errors.Is(err, ErrSymbol) || !strings.Contains(err.Error(), "ncclGetUniqueId") {
			t.Fatalf("libc: got %v, want ErrSymbol", err)
		}
	}
}

// fakeNCCL stands in for libnccl.so.2: it records the arguments of each
// call in last[] and doubles an all-reduce's buffer (two equal ranks), on
// host memory.
const fakeNCCL = `
#include <stddef.h>
typedef struct { char internal[128]; } ncclUniqueId;
long long last[10];
int ncclGetUniqueId(ncclUniqueId* id) { for (int i = 0; i < 128; i++) id->internal[i] = (char)(3 * i); return 0; }
int ncclCommInitRank(void** comm, int n, ncclUniqueId id, int rank) {
	int ok = 1;
	for (int i = 0; i < 128; i++) if (id.internal[i] != (char)(3 * i)) ok = 0;
	last[0] = n; last[1] = rank; last[2] = ok; *comm = (void*)0x1234;
	return n == 99 ? 5 : 0;
}
int ncclAllReduce(const void* s, void* r, size_t count, int dt, int op, void* comm, void* stream) {
	float* f = (float*)r;
	for (size_t i = 0; i < count; i++) f[i] *= 2;
	last[3] = count; last[4] = dt; last[5] = op; last[6] = (long long)comm; last[7] = (long long)stream;
	return s == r ? 0 : 3;
}
int ncclReduce(const void* s, void* r, size_t count, int dt, int op, int root, void* comm, void* stream) {
	last[3] = count; last[4] = dt; last[5] = op; last[8] = root; return 0;
}
int ncclBroadcast(const void* s, void* r, size_t count, int dt, int root, void* comm, void* stream) {
	last[3] = count; last[4] = dt; last[8] = root; return 0;
}
int ncclCommDestroy(void* c) { last[9] = 1; return 0; }
int ncclCommAbort(void* c) { last[9] = 2; return 0; }
long long* fake_last(void) { return last; }
const char* ncclGetErrorString(int c) { return c == 5 ? "invalid usage" : "unknown"; }
`

// hostDevice is a CPU device posing as a GPU: its buffers' "device
// pointers" are host addresses, which the stand-in library reads.
type hostDevice struct{ *tensor.CPU }

func (d hostDevice) Stream() driver.Stream { return 0x5678 }
func (d hostDevice) Do(f func()) error     { f(); return nil }
func (d hostDevice) Pointer(b tensor.Buffer) (driver.DevicePtr, bool) {
	f, err := d.Float32s(b)
	if err != nil || len(f) == 0 {
		return 0, false
	}
	return driver.DevicePtr(unsafe.Pointer(&f[0])), true
}

// TestBindingsAgainstStandIn builds the stand-in with the C compiler and
// drives every binding through Comm: the unique id survives the trip by
// value, and each call gets the pointer, count, ncclFloat32, ncclSum, root,
// communicator and the device's stream.
func TestBindingsAgainstStandIn(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler for the stand-in libnccl")
	}
	dir := t.TempDir()
	src, so := filepath.Join(dir, "fake.c"), filepath.Join(dir, "libnccl.so.2")
	os.WriteFile(src, []byte(fakeNCCL), 0o644)
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-o", so, src).CombinedOutput(); err != nil {
		t.Skipf("cannot build the stand-in: %v\n%s", err, out)
	}
	l, err := Load(so)
	if err != nil {
		t.Fatal(err)
	}
	var lastOf func() *int64
	purego.RegisterLibFunc(&lastOf, l.handle, "fake_last")
	last := unsafe.Slice(lastOf(), 10) // the stand-in's record
	id, err := l.NewUniqueID()
	if err != nil || len(id) != IDSize || id[5] != 15 {
		t.Fatalf("id %v %v", id, err)
	}
	cpu, _ := tensor.NewCPU("gpu", 1)
	defer cpu.Close()
	dev := hostDevice{cpu}
	if _, err := l.InitRank(dev, 99, 1, id); err == nil || !strings.Contains(err.Error(), "invalid usage") {
		t.Fatalf("failing init: %v", err)
	}
	c, err := l.InitRank(dev, 4, 3, id)
	if err != nil || last[0] != 4 || last[1] != 3 || last[2] != 1 {
		t.Fatalf("init: %v, recorded %v (id intact: %d)", err, last[:3], last[2])
	}
	b, _ := cpu.Alloc(tensor.F32, 5)
	cpu.CopyIn(b, []float32{1, 2, 3, 4, 5})
	if err := c.AllReduce(b, parallel.Avg); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 5)
	cpu.CopyOut(got, b)
	if got[4] != 2.5 || last[3] != 5 || last[4] != 7 || last[5] != 0 || last[6] != 0x1234 || last[7] != 0x5678 {
		t.Fatalf("all-reduce: %v, recorded %v", got, last[3:8])
	}
	if err := c.Reduce(b.Slice(1, 3), parallel.Sum, 2); err != nil || last[3] != 3 || last[8] != 2 {
		t.Fatalf("reduce: %v, recorded %v", err, last)
	}
	if err := c.Broadcast(b, 1); err != nil || last[3] != 5 || last[8] != 1 {
		t.Fatalf("broadcast: %v, recorded %v", err, last)
	}
	if err := c.Broadcast(b, 4); !errors.Is(err, parallel.ErrConfig) {
		t.Fatalf("root 4 of 4: %v", err)
	}
	c.Abort(errors.New("rank 2 died"))
	if last[9] != 2 {
		t.Fatal("ncclCommAbort not called")
	}
	if err := c.AllReduce(b, parallel.Sum); !errors.Is(err, parallel.ErrAborted) || !strings.Contains(err.Error(), "rank 2 died") {
		t.Fatalf("after Abort: %v", err)
	}
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
}
