package objstore

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// Scheme starts every object URL.
const Scheme = "s3://"

// maxExpansion bounds what one brace pattern expands to, so a typo such
// as {0..999999999} fails at once instead of issuing a billion requests.
const maxExpansion = 100000

// IsURL reports whether a dataset PATH names objects rather than files.
func IsURL(p string) bool { return strings.HasPrefix(p, Scheme) }

// Object is one object of a bucket, as listed or HEADed.
type Object struct {
	Bucket, Key string
	Size        int64
	ETag        string // without quotes
}

// URL names the object as s3://BUCKET/KEY.
func (o Object) URL() string { return Scheme + o.Bucket + "/" + o.Key }

// splitURL splits s3://BUCKET/KEY into a bucket and a key (or key pattern).
func splitURL(u string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(u, Scheme)
	if !ok {
		return "", "", fmt.Errorf("objstore: %q: not an %sBUCKET/KEY URL", u, Scheme)
	}
	bucket, key, _ = strings.Cut(rest, "/")
	if !validBucket(bucket) {
		return "", "", fmt.Errorf("objstore: %q: bucket %q is not a valid bucket name", u, bucket)
	}
	return bucket, key, nil
}

// validBucket accepts S3's bucket names (3–63 of a-z 0-9 . -, starting
// and ending with a letter or digit). The name becomes a directory of the
// cache, so nothing else may pass.
func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 || b[0] == '.' || b[0] == '-' || b[len(b)-1] == '.' || b[len(b)-1] == '-' {
		return false
	}
	for _, c := range []byte(b) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	return !strings.Contains(b, "..")
}

// safeKey reports whether a key can name a file under the cache: no
// empty, "." or ".." element and no NUL, so no key can reach outside its
// bucket's directory.
func safeKey(k string) bool {
	if k == "" || strings.ContainsRune(k, 0) {
		return false
	}
	for _, e := range strings.Split(k, "/") {
		if e == "" || e == "." || e == ".." {
			return false
		}
	}
	return true
}

// hasGlob reports whether a key pattern has path.Match metacharacters.
func hasGlob(p string) bool { return strings.ContainsAny(p, "*?[") }

// globPrefix is the literal part of a pattern before its first
// metacharacter: the prefix to list.
func globPrefix(p string) string {
	if i := strings.IndexAny(p, "*?[\\"); i >= 0 {
		return p[:i]
	}
	return p
}

// matchKey matches a key against a pattern; '*' does not cross '/', as
// in a shell glob over files.
func matchKey(pattern, key string) (bool, error) {
	ok, err := path.Match(pattern, key)
	if err != nil {
		return false, fmt.Errorf("objstore: pattern %q: %w", pattern, err)
	}
	return ok, nil
}

// expandBraces expands the shell's brace forms, left to right:
// {A..B} (integers; zero-padded bounds keep their width, as in bash) and
// {x,y,z}. Text without braces is returned as is.
func expandBraces(s string) ([]string, error) {
	open := strings.IndexByte(s, '{')
	if open < 0 {
		return []string{s}, nil
	}
	end := strings.IndexByte(s[open:], '}')
	if end < 0 {
		return nil, fmt.Errorf("objstore: pattern %q: unclosed {", s)
	}
	end += open
	body, pre, post := s[open+1:end], s[:open], s[end+1:]
	var alts []string
	if lo, hi, isRange := strings.Cut(body, ".."); isRange {
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a < 0 || b < a {
			return nil, fmt.Errorf("objstore: pattern %q: {%s}: want {FIRST..LAST}, non-negative integers, FIRST ≤ LAST", s, body)
		}
		if b-a >= maxExpansion {
			return nil, fmt.Errorf("objstore: pattern %q: {%s} expands to over %d names", s, body, maxExpansion)
		}
		width := 0
		if len(lo) > 1 && lo[0] == '0' || len(hi) > 1 && hi[0] == '0' {
			width = max(len(lo), len(hi))
		}
		for i := a; i <= b; i++ {
			alts = append(alts, fmt.Sprintf("%0*d", width, i))
		}
	} else {
		alts = strings.Split(body, ",")
	}
	rest, err := expandBraces(post)
	if err != nil {
		return nil, err
	}
	if len(alts)*len(rest) > maxExpansion {
		return nil, fmt.Errorf("objstore: pattern %q expands to over %d names", s, maxExpansion)
	}
	out := make([]string, 0, len(alts)*len(rest))
	for _, a := range alts {
		for _, r := range rest {
			out = append(out, pre+a+r)
		}
	}
	return out, nil
}
