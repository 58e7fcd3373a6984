package srccheck

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Module is the module path of the repository's top go.mod.
const Module = "github.com/loaderd/loaderd"

// The words Marks looks for, lower case. They are built from pieces so
// that this package's own files do not carry them.
var (
	ownership = "copy" + "right"
	spdxTag   = "spdx-" + "license-identifier"
)

// sourceExts are the extensions of the files Checked admits.
var sourceExts = map[string]bool{
	".go": true, ".s": true, ".c": true, ".cu": true, ".cuh": true, ".h": true, ".py": true, ".sh": true,
}

// Checked reports whether the file at rel, a slash-separated path
// relative to the repository's root, is a source file to check: one of
// sourceExts, not under a testdata directory or a hidden one (.git, and
// the build outputs and tool environments kept in hidden directories,
// whose files are copies or other projects' own), and not generated
// protobuf code (*.pb.go, *_pb2*.py), which protoc writes.
func Checked(rel string) bool {
	dir, name := path.Split(rel)
	for _, d := range strings.Split(strings.Trim(dir, "/"), "/") {
		if skipDir(d) {
			return false
		}
	}
	if strings.HasSuffix(name, ".pb.go") ||
		strings.HasSuffix(name, ".py") && strings.Contains(name, "_pb2") {
		return false
	}
	return sourceExts[path.Ext(name)]
}

// skipDir reports whether a directory of this name is left out of Scan.
func skipDir(name string) bool {
	return name == "testdata" || len(name) > 1 && name[0] == '.' && name != ".."
}

// Mark is one offending line of a file.
type Mark struct {
	Line int    // 1-based
	Text string // the line, trimmed
}

func (m Mark) String() string { return fmt.Sprintf("line %d: %s", m.Line, m.Text) }

// Marks returns every line of src that carries an ownership notice (the
// word, in any case) or an SPDX licence tag, in order; none for a file
// that is the project's own.
func Marks(src []byte) []Mark {
	var out []Mark
	for i, l := range bytes.Split(src, []byte("\n")) {
		low := bytes.ToLower(l)
		if bytes.Contains(low, []byte(ownership)) || bytes.Contains(low, []byte(spdxTag)) {
			out = append(out, Mark{Line: i + 1, Text: string(bytes.TrimSpace(l))})
		}
	}
	return out
}

// Finding is a file with offending lines.
type Finding struct {
	Path  string // relative to the root, slash-separated
	Marks []Mark
}

// Scan walks the tree at root and returns the files Checked admits that
// have Marks, and how many files it checked. Symbolic links are not
// followed.
func Scan(root string) (found []Finding, checked int, err error) {
	err = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if e.IsDir() {
			if rel != "." && skipDir(e.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() || !Checked(rel) {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		checked++
		if m := Marks(src); len(m) > 0 {
			found = append(found, Finding{Path: rel, Marks: m})
		}
		return nil
	})
	return found, checked, err
}

// Root returns the repository's root: the nearest directory at or above
// dir whose go.mod declares Module, or that holds .git (a directory, or
// a file in a git worktree).
func Root(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; {
		if modulePath(filepath.Join(d, "go.mod")) == Module {
			return d, nil
		}
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			return d, nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", errors.New("srccheck: no go.mod of " + Module + " and no .git at or above " + dir)
		}
		d = up
	}
}

// modulePath returns the module path a go.mod declares, "" when the file
// is missing or declares none.
func modulePath(gomod string) string {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(strings.TrimSpace(l))
		if len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`+"`")
		}
	}
	return ""
}
