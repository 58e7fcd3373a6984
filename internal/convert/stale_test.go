//go:build unix

package convert

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// leftovers makes the entries a directory of outputs may hold, all last
// changed an hour before this process started unless fresh, and returns
// them by what a run should do: remove or keep.
type leftover struct {
	name  string
	dir   bool   // a directory (else a regular file)
	link  bool   // a symbolic link to a directory elsewhere
	held  bool   // locked by a live run (this process, through its own open file)
	fresh bool   // changed after this process started
	gone  bool   // what the run should do: remove it
	inner string // a file inside a directory, as a stage holds part files
}

func makeLeftovers(t *testing.T, dir string, ls []leftover) {
	t.Helper()
	old := processStart.Add(-time.Hour)
	for _, l := range ls {
		p := filepath.Join(dir, l.name)
		var err error
		switch {
		case l.link:
			err = os.Symlink(t.TempDir(), p)
		case l.dir:
			if err = os.Mkdir(p, 0o755); err == nil && l.inner != "" {
				err = os.WriteFile(filepath.Join(p, l.inner), make([]byte, 4096), 0o644)
			}
		default:
			err = os.WriteFile(p, []byte("half an index"), 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
		if l.held {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			if err := holdTemp(f, p); err != nil {
				t.Fatal(err)
			}
		}
		if !l.fresh {
			ts := []unix.Timespec{unix.NsecToTimespec(old.UnixNano()), unix.NsecToTimespec(old.UnixNano())}
			if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil { // a link's own times
				t.Fatal(err)
			}
		}
	}
}

func checkLeftovers(t *testing.T, dir string, ls []leftover) {
	t.Helper()
	for _, l := range ls {
		_, err := os.Lstat(filepath.Join(dir, l.name))
		if gone := err != nil; gone != l.gone {
			t.Errorf("%s: removed %v, want %v", l.name, gone, l.gone)
		}
	}
}

func needFlock(t *testing.T) {
	if f, ok := tryLock(t.TempDir(), true); ok {
		f.Close()
		return
	}
	t.Skipf("no flock on %s (%s)", os.TempDir(), runtime.GOOS)
}

// TestConvertRemovesStaleStages: a conversion to OUT first removes the
// stages .OUT.tmp-NNN earlier conversions to OUT left (a kill at the
// final rename left 146 MB), and only those: not one a live conversion
// holds, not one changed since this process started, not another
// output's, not a link, a file or a moved-aside old output.
func TestConvertRemovesStaleStages(t *testing.T) {
	needFlock(t)
	dir := t.TempDir()
	ls := []leftover{
		{name: ".conv.tmp-1234567", dir: true, inner: "part-00000.arrow", gone: true},
		{name: ".conv.tmp-42", dir: true, gone: true},
		{name: ".conv.tmp-777", dir: true, held: true},
		{name: ".conv.tmp-888", dir: true, fresh: true},
		{name: ".conv.tmp-999", link: true},
		{name: ".conv.tmp-555", dir: false},
		{name: ".conv.tmp-12x", dir: true},
		{name: ".conv.tmp-", dir: true},
		{name: ".conv.old-123", dir: true, inner: "old"},
		{name: ".other.tmp-123", dir: true},
		{name: ".conv.arrow.tmp-123", dir: true},
	}
	makeLeftovers(t, dir, ls)
	out := filepath.Join(dir, "conv")
	if _, err := Run(context.Background(), Options{From: "synthetic:40", To: "arrow:" + out, Shard: 20}); err != nil {
		t.Fatal(err)
	}
	checkLeftovers(t, dir, ls)
	if n, files := arrowLen(t, out); n != 40 || len(files) != 2 {
		t.Fatalf("output: %d samples in %v", n, files)
	}
	// The conversion's own stage is gone, and nothing else is new.
	left, _ := filepath.Glob(filepath.Join(dir, ".conv.tmp-*"))
	if len(left) != 6 {
		t.Fatalf("stages left: %v", left)
	}
}

// TestIndexRemovesStaleTemps: `loaderd index` first removes the
// .SHARD.tar.idx.NNN files an earlier run killed before its rename left
// beside the shards it indexes, and only those.
func TestIndexRemovesStaleTemps(t *testing.T) {
	needFlock(t)
	dir := t.TempDir()
	src, err := os.ReadFile("../../loader/testdata/formats/bad/ext.tar")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a.tar", "b.tar"} {
		os.WriteFile(filepath.Join(dir, n), src, 0o644)
	}
	ls := []leftover{
		{name: ".a.tar.idx.2938475612", gone: true},
		{name: ".a.tar.idx.7", gone: true},
		{name: ".a.tar.idx.31337", held: true},
		{name: ".a.tar.idx.4444", fresh: true},
		{name: ".a.tar.idx.x12"},
		{name: ".a.tar.idx.12.bak"},
		{name: ".a.tar.idx.999", dir: true},
		{name: ".a.tar.idx.5151", link: true},
		{name: ".c.tar.idx.123"},
	}
	makeLeftovers(t, dir, ls)
	got, err := IndexTars([]string{filepath.Join(dir, "a.tar")})
	if err != nil || len(got) != 1 {
		t.Fatalf("%v, %v", got, err)
	}
	checkLeftovers(t, dir, ls)
	// b.tar was not indexed: its leftovers are another run's business.
	stale := filepath.Join(dir, ".b.tar.idx.123")
	makeLeftovers(t, dir, []leftover{{name: ".b.tar.idx.123"}})
	if _, err := IndexTars([]string{filepath.Join(dir, "b.tar")}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(stale); err == nil {
		t.Fatal("indexing b.tar left .b.tar.idx.123")
	}
	if _, err := os.Lstat(filepath.Join(dir, ".c.tar.idx.123")); err != nil {
		t.Fatal("indexing removed another shard's temporary")
	}
}

// TestStageOfKilledRun: a stage another process holds is in use however
// old it is; once that process is killed (SIGKILL: no cleanup of its own
// runs), the lock is gone and the stage is removed.
func TestStageOfKilledRun(t *testing.T) {
	needFlock(t)
	if os.Getenv("CONVERT_STAGE_CHILD") != "" {
		return // the child is TestStageChild
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "conv")
	cmd := exec.Command(os.Args[0], "-test.run=^TestStageChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CONVERT_STAGE_CHILD="+out)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe() // the child waits on it
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	stage := strings.TrimSpace(line)
	if err != nil || !strings.HasPrefix(filepath.Base(stage), ".conv.tmp-") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child: %q, %v", line, err)
	}
	saved := processStart
	t.Cleanup(func() { processStart = saved })
	processStart = time.Now().Add(time.Hour) // as if this run started after the child's stage was last changed
	if got := removeStale(dir, ".conv.tmp-", true); len(got) != 0 {
		t.Fatalf("removed %v while its owner lives", got)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if got := removeStale(dir, ".conv.tmp-", true); !slices.Equal(got, []string{stage}) {
		t.Fatalf("after the owner's kill: removed %v, want %s", got, stage)
	}
}

// TestStageChild is TestStageOfKilledRun's other process: it makes a
// stage, says its name and waits to be killed.
func TestStageChild(t *testing.T) {
	out := os.Getenv("CONVERT_STAGE_CHILD")
	if out == "" {
		t.Skip("the child of TestStageOfKilledRun")
	}
	stage, _, err := newStage(out)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(stage, "part-00000.arrow"), []byte("half"), 0o644)
	os.Stdout.WriteString(stage + "\n")
	bufio.NewReader(os.Stdin).ReadString('\n') // until killed
}
