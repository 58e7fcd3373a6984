package srccheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The offending words, built from pieces as in srccheck.go: written out,
// this file would be the first one the tree test names.
var (
	word = "Copy" + "right"
	spdx = "SPDX-" + "License-Identifier"
)

// TestTreeIsOwnCode walks the repository from its root and fails naming
// each source file that carries another project's ownership notice or
// licence tag, with the offending lines.
func TestTreeIsOwnCode(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := Root(wd)
	if err != nil {
		t.Fatal(err)
	}
	found, checked, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		var lines []string
		for _, m := range f.Marks {
			lines = append(lines, m.String())
		}
		t.Errorf("%s carries another project's notice; rewrite it as our own code:\n\t%s", f.Path, strings.Join(lines, "\n\t"))
	}
	// A walk that found nothing to read proves nothing: the tree has
	// hundreds of sources, this file among them.
	if checked < 100 {
		t.Errorf("checked only %d files under %s", checked, root)
	}
	if !Checked("internal/srccheck/srccheck_test.go") {
		t.Error("this test's own file is not checked")
	}
	t.Logf("%d source files checked under %s", checked, root)
}

// TestMarks: Marks finds a header copied from another project, whatever
// its comment syntax, case or position, and nothing in our own code.
func TestMarks(t *testing.T) {
	goHeader := "// " + word + " 2009 The Go Authors. All rights reserved.\n" +
		"// Use of this source code is governed by a BSD-style\n" +
		"// license that can be found in the LICENSE file.\n\npackage jpeg\n"
	for _, c := range []struct {
		name  string
		src   string
		lines []int
	}{
		{"Go's header", goHeader, []int{1}},
		{"Go's header, CRLF", strings.ReplaceAll(goHeader, "\n", "\r\n"), []int{1}},
		{"upper case", "/* " + strings.ToUpper(word) + " (C) 1991-2020 Thomas G. Lane, Guido Vollbeding */\n", []int{1}},
		{"lower case, no newline", "# " + strings.ToLower(word) + " notice", []int{1}},
		{"in the middle of a word", "x := 1 // see the " + word + "ed text\n", []int{1}},
		{"below a long file", strings.Repeat("func f() {}\n", 5000) + "// " + word + " 2020 NVIDIA\n", []int{5001}},
		{"SPDX tag", "#!/bin/sh\n# " + spdx + ": Apache-2.0\necho\n", []int{2}},
		{"SPDX tag, lower case", "// " + strings.ToLower(spdx) + ": MIT\n", []int{1}},
		{"C header", "/*\n * " + word + " 2017 NVIDIA Corporation\n */\n#include <cuda.h>\n", []int{2}},
		{"two notices", "// " + word + " A\n// " + spdx + ": BSD-3-Clause\n", []int{1, 2}},
		{"own Go code", "// Package x does y.\npackage x\n\nfunc f() int { return 1 }\n", nil},
		{"own Python", "\"\"\"loaderd's client.\"\"\"\nimport os\n", nil},
		{"licence named, no notice", "// arithmetic ported from libjpeg-turbo under its IJG and BSD licences\n", nil},
		{"words apart", "// copy right\n", nil},
		{"empty", "", nil},
	} {
		var got []int
		for _, m := range Marks([]byte(c.src)) {
			got = append(got, m.Line)
			if m.Text == "" || strings.ContainsAny(m.Text, "\r\n") {
				t.Errorf("%s: line %d given as %q", c.name, m.Line, m.Text)
			}
		}
		if !slices.Equal(got, c.lines) {
			t.Errorf("%s: marks on lines %v, want %v", c.name, got, c.lines)
		}
	}
}

// TestChecked: the file types and places the tree test reads.
func TestChecked(t *testing.T) {
	for rel, want := range map[string]bool{
		"main.go":                                 true,
		"loader/imagedec/decode.go":               true,
		"loader/imagedec/jpegx/idct_amd64.s":      true,
		"trainer/cuda/kernels/conv.cu":            true,
		"trainer/cuda/kernels/prelude.cuh":        true,
		"x/y.c":                                   true,
		"x/y.h":                                   true,
		"python/loaderd/client.py":                true,
		"scripts/test.sh":                         true,
		"README.md":                               false,
		"go.mod":                                  false,
		"python/loaderd/v1/loader_pb2.pyi":        false,
		"proto/loaderd/v1/loader.pb.go":           false,
		"proto/loaderd/v1/loader_grpc.pb.go":      false,
		"python/loaderd/v1/loader_pb2.py":         false,
		"python/loaderd/v1/loader_pb2_grpc.py":    false,
		"loader/testdata/formats/gen.go":          false,
		"augment/testdata/tvparity.py":            false,
		".git/hooks/pre-commit.sh":                false,
		".venv/lib/python3.11/site-packages/a.py": false,
		"x/.cache/y.go":                           false,
		"proto/loaderd/v1/loader.go":              true,
	} {
		if got := Checked(rel); got != want {
			t.Errorf("Checked(%q) = %v, want %v", rel, got, want)
		}
	}
}

// TestScanFindsPlanted: Scan over a small tree names the planted files,
// in every checked type and at any depth, and only those; Root finds the
// tree from deep inside it.
func TestScanFindsPlanted(t *testing.T) {
	root := t.TempDir()
	goHeader := "// " + word + " 2009 The Go Authors. All rights reserved.\n\npackage x\n"
	files := map[string]string{
		"go.mod":                       "module " + Module + "\n\ngo 1.26\n",
		"a/copied.go":                  goHeader,
		"a/b/c/deep.s":                 "// " + spdx + ": BSD-3-Clause\nTEXT ·f(SB),0,$0\n",
		"k/kernel.cu":                  "/* " + word + " (c) NVIDIA */\n",
		"k/kernel.cuh":                 "// " + word + "\n",
		"c/x.c":                        "/* " + word + " */\n",
		"c/x.h":                        "/* " + word + " */\n",
		"py/vendored.py":               "# " + word + " (c) Someone\n",
		"sh/run.sh":                    "#!/bin/sh\n# " + spdx + ": MIT\n",
		"a/own.go":                     "package x\n",
		"a/testdata/copied.go":         goHeader,
		"a/gen.pb.go":                  goHeader,
		"py/api_pb2.py":                "# " + word + "\n",
		".git/x.go":                    goHeader,
		".venv/lib/site-packages/a.py": "# " + word + "\n",
		"README.md":                    word + " nobody\n",
		"a/b/c/notes.txt":              word + "\n",
	}
	for rel, src := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	found, checked, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range found {
		got = append(got, f.Path)
	}
	want := []string{"a/b/c/deep.s", "a/copied.go", "c/x.c", "c/x.h", "k/kernel.cu", "k/kernel.cuh", "py/vendored.py", "sh/run.sh"}
	if !slices.Equal(got, want) {
		t.Errorf("Scan named %v, want %v", got, want)
	}
	if checked != len(want)+1 { // and a/own.go
		t.Errorf("Scan checked %d files, want %d", checked, len(want)+1)
	}
	if r, err := Root(filepath.Join(root, "a", "b", "c")); err != nil || r != root {
		t.Errorf("Root from a/b/c = %q, %v; want %q", r, err, root)
	}
}

// TestRootStopsAtRepository: Root takes the nearest directory with .git
// or the top go.mod, not a nested module's go.mod.
func TestRootStopsAtRepository(t *testing.T) {
	root := t.TempDir()
	for rel, src := range map[string]string{
		".git":              "gitdir: /elsewhere\n", // a worktree's .git is a file
		"trainer/go.mod":    "module " + Module + "/trainer\n",
		"trainer/x/y/z.txt": "",
	} {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := Root(filepath.Join(root, "trainer", "x", "y")); err != nil || r != root {
		t.Errorf("Root = %q, %v; want %q", r, err, root)
	}
}
