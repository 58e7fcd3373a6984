package server

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// minTokenLen keeps guessable tokens out of the file.
const minTokenLen = 16

// grant is what one token may do. The token itself is kept only as its
// SHA-256, and named in logs by a short prefix of that.
type grant struct {
	sum      [sha256.Size]byte
	line     int
	all      bool            // datasets=*
	datasets map[string]bool // else these
	streams  int             // streams at once; 0 is no limit of its own
}

func (g *grant) id() string { return "sha256:" + hex.EncodeToString(g.sum[:4]) }

func (g *grant) may(dataset string) bool { return g.all || g.datasets[dataset] }

func (g *grant) list() string {
	if g.all {
		return "*"
	}
	names := make([]string, 0, len(g.datasets))
	for n := range g.datasets {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

type tokenTable struct{ grants []grant }

// loadTokens reads the --auth-tokens file: one token per line,
//
//	TOKEN datasets=NAME[,NAME...]|* [streams=N]
//
// with blank lines and lines starting with # ignored. A malformed line is
// an error naming its number, never its contents: it may hold a token.
func loadTokens(path string) (*tokenTable, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseTokens(b)
}

func parseTokens(b []byte) (*tokenTable, error) {
	t := &tokenTable{}
	seen := map[[sha256.Size]byte]int{}
	var errs []error
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		g, err := parseGrant(line, n)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", n, err))
			continue
		}
		if first, dup := seen[g.sum]; dup {
			errs = append(errs, fmt.Errorf("line %d: the token of line %d again", n, first))
			continue
		}
		seen[g.sum] = n
		t.grants = append(t.grants, g)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(errs) == 0 && len(t.grants) == 0 {
		errs = append(errs, errors.New("no tokens (every client would be refused)"))
	}
	return t, errors.Join(errs...)
}

func parseGrant(line string, n int) (grant, error) {
	f := strings.Fields(line)
	tok := f[0]
	if strings.Contains(tok, "=") {
		return grant{}, errors.New("want TOKEN first, then datasets=... [streams=N]")
	}
	if len(tok) < minTokenLen {
		return grant{}, fmt.Errorf("token shorter than %d characters", minTokenLen)
	}
	g := grant{sum: sha256.Sum256([]byte(tok)), line: n}
	hasDatasets := false
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "datasets":
			if hasDatasets {
				return grant{}, errors.New("datasets= twice")
			}
			hasDatasets = true
			if v == "*" {
				g.all = true
				continue
			}
			g.datasets = map[string]bool{}
			for _, d := range strings.Split(v, ",") {
				if d == "" || d == "*" {
					return grant{}, errors.New("datasets= wants NAME[,NAME...] or * alone")
				}
				g.datasets[d] = true
			}
		case "streams":
			s, err := strconv.Atoi(v)
			if err != nil || s < 1 {
				return grant{}, errors.New("streams= wants a number of 1 or more")
			}
			g.streams = s
		default:
			return grant{}, fmt.Errorf("unknown field %q (want datasets= and streams=)", k)
		}
	}
	if !hasDatasets {
		return grant{}, errors.New("no datasets= (datasets=* for every dataset)")
	}
	return g, nil
}

// lookup finds tok's grant in time independent of where, or whether, it
// matches: every entry's hash is compared.
func (t *tokenTable) lookup(tok string) *grant {
	sum := sha256.Sum256([]byte(tok))
	found := -1
	for i := range t.grants {
		eq := subtle.ConstantTimeCompare(sum[:], t.grants[i].sum[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return nil
	}
	return &t.grants[found]
}
