package objstore_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loaderd/loaderd/loader/objstore"
	"github.com/loaderd/loaderd/loader/objstore/s3test"
)

// TestMain doubles as the child of TestKill9DuringFill: a process that
// starts a fill and is killed in the middle of it.
func TestMain(m *testing.M) {
	if dir := os.Getenv("OBJSTORE_TEST_FILL_CACHE"); dir != "" {
		c, err := objstore.OpenCache(dir, 0)
		if err == nil {
			c.Retry = objstore.Retry{Attempts: 1, Base: time.Millisecond, MaxDelay: time.Millisecond, Stall: time.Hour}
			_, err = c.Shards(context.Background(), os.Getenv("OBJSTORE_TEST_FILL_URL"), ".tar", objstore.Options{Endpoint: os.Getenv("OBJSTORE_TEST_FILL_ENDPOINT")})
		}
		fmt.Fprintln(os.Stderr, "child: fill ended, which it should not:", err)
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// TestKill9DuringFill: a daemon killed with SIGKILL in the middle of a
// fill leaves nothing a restart trusts: the next open clears the
// half-written file and fetches the shard again, whole.
func TestKill9DuringFill(t *testing.T) {
	e := newEnv(t, 0)
	b := e.srv.Bucket(t, "kill")
	data := blob(4<<20, 3)
	e.srv.Put(t, b, "big.tar", data)
	e.px.Inject(s3test.Stall, 1, "GET", "big.tar") // half the body, then nothing
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "OBJSTORE_TEST_FILL_CACHE="+dir, "OBJSTORE_TEST_FILL_URL=s3://kill/big.tar", "OBJSTORE_TEST_FILL_ENDPOINT="+e.px.URL)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var partial string
	for deadline := time.Now().Add(30 * time.Second); partial == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		m, _ := filepath.Glob(filepath.Join(dir, ".partial", "*"))
		for _, p := range m {
			if fi, err := os.Stat(p); err == nil && fi.Size() > 0 {
				partial = p
			}
		}
	}
	if partial == "" {
		t.Fatal("the child never started writing the shard")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	fi, _ := os.Stat(partial)
	t.Logf("killed with %d of %d bytes written to %s", fi.Size(), len(data), filepath.Base(partial))
	c := openCache(t, dir, 0)
	noPartial(t, dir)
	if c.Used() != 0 {
		t.Fatalf("the restarted cache counts %d bytes: it trusts something of the killed fill", c.Used())
	}
	files, err := c.Shards(context.Background(), "s3://kill/big.tar", ".tar", e.opts)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, files, data)
}

// TestRequireS3: with LOADERD_REQUIRE_S3=1 (CI) a test that needs
// versitygw fails when it is missing, rather than skipping.
func TestRequireS3(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestShards$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PATH=/nonexistent", "GOPATH="+t.TempDir(), "LOADERD_REQUIRE_S3=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "LOADERD_REQUIRE_S3=1: s3test: versitygw is not installed") {
		t.Fatalf("without versitygw and with LOADERD_REQUIRE_S3=1: %v\n%s", err, out)
	}
}
