package tar

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// A sidecar index is SHARD.tar.idx, beside its shard (a file, or an
// object under the same bucket and prefix), written by `loaderd index`.
// With it, opening a remote shard costs one small GET instead of reading
// its headers. It is text, one member a line:
//
//	loaderd-tar-index 1
//	size 17829888
//	md5 5d41402abc4b2a76b9719d911017c592
//	members 5000
//	OFFSET SIZE "NAME" ["DATA"]
//	…
//	end
//
// NAME and DATA are Go-quoted; DATA is the content of a member of at most
// 64 bytes (a WebDataset label). size and md5 are the shard's: an index
// whose shard has another size, or an MD5 ETag that differs, is stale and
// ignored (with a log line), and the shard's headers are read instead.
// The members must be those the shard's headers list, in order; a remote
// read checks the header before each member it fetches (its name too),
// and a cached copy is indexed again and compared: a sidecar found wrong
// is dropped and the shard re-indexed from its headers (dropSidecar).

// SidecarSuffix is appended to a shard's name to name its sidecar index.
const SidecarSuffix = ".idx"

const sidecarMagic = "loaderd-tar-index 1"

// maxSidecar bounds a sidecar read from a server: 1<<26 members of
// under 64 bytes of name would be far less.
const maxSidecar = 1 << 32

// errStale marks a sidecar that does not describe its shard.
var errStale = errors.New("stale")

// Index returns the sidecar index of the tar archive r (size bytes),
// reading it whole once for its MD5.
func Index(r io.ReaderAt, size int64) ([]byte, error) {
	ms, err := indexTar(r, size, true)
	if err != nil {
		return nil, err
	}
	h := md5.New()
	if _, err := io.Copy(h, io.NewSectionReader(r, 0, size)); err != nil {
		return nil, err
	}
	return marshalIndex(size, hex.EncodeToString(h.Sum(nil)), ms), nil
}

func marshalIndex(size int64, sum string, ms []tarMember) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\nsize %d\nmd5 %s\nmembers %d\n", sidecarMagic, size, sum, len(ms))
	for _, m := range ms {
		fmt.Fprintf(&b, "%d %d %s", m.off, m.size, strconv.Quote(m.name))
		if m.small != nil {
			b.WriteString(" " + strconv.Quote(string(m.small)))
		}
		b.WriteByte('\n')
	}
	b.WriteString("end\n")
	return b.Bytes()
}

// parseIndex reads a sidecar and checks it against the shard's size and,
// when etag is an MD5 (a single-part upload), its ETag: a mismatch wraps
// errStale. Members must lie in [512, size) in increasing order, each
// after a header, as indexTar returns them.
func parseIndex(data []byte, size int64, etag string) ([]tarMember, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	line := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		line++
		return sc.Text(), true
	}
	var head [4]string
	for i := range head {
		t, ok := next()
		if !ok {
			return nil, fmt.Errorf("line %d: the index ends early", line+1)
		}
		head[i] = t
	}
	if head[0] != sidecarMagic {
		return nil, fmt.Errorf("line 1: %q is not %q", head[0], sidecarMagic)
	}
	var got, n int64
	var sum string
	if _, err := fmt.Sscanf(head[1]+"\n"+head[2]+"\n"+head[3], "size %d\nmd5 %s\nmembers %d", &got, &sum, &n); err != nil {
		return nil, fmt.Errorf("lines 2-4: %w", err)
	}
	if got != size {
		return nil, fmt.Errorf("%w: it describes %d bytes, the shard has %d", errStale, got, size)
	}
	if len(etag) == 32 && !strings.EqualFold(etag, sum) {
		return nil, fmt.Errorf("%w: it describes MD5 %s, the shard's ETag is %s", errStale, sum, etag)
	}
	if n < 0 || n > maxTarMembers {
		return nil, fmt.Errorf("line 4: %d members", n)
	}
	ms := make([]tarMember, 0, n)
	end := int64(0)
	for range n {
		t, ok := next()
		if !ok {
			return nil, fmt.Errorf("line %d: the index ends early", line+1)
		}
		m, err := parseMember(t)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if m.off < end+512 || m.size < 0 || m.off+m.size > size || m.small != nil && int64(len(m.small)) != m.size {
			return nil, fmt.Errorf("line %d: member %q at %d+%d does not follow a header after %d, inside %d bytes", line, m.name, m.off, m.size, end, size)
		}
		end = m.off + m.size
		ms = append(ms, m)
	}
	if t, ok := next(); !ok || t != "end" {
		return nil, fmt.Errorf("want end after the %d members", n)
	}
	if _, ok := next(); ok {
		return nil, fmt.Errorf("line %d: text after end", line)
	}
	return ms, sc.Err()
}

func parseMember(t string) (tarMember, error) {
	off, rest, _ := strings.Cut(t, " ")
	sz, rest, _ := strings.Cut(rest, " ")
	var m tarMember
	var err1, err2 error
	m.off, err1 = strconv.ParseInt(off, 10, 64)
	m.size, err2 = strconv.ParseInt(sz, 10, 64)
	if err1 != nil || err2 != nil {
		return m, fmt.Errorf("want OFFSET SIZE \"NAME\": %q", t)
	}
	q, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return m, fmt.Errorf("name: %w", err)
	}
	m.name, _ = strconv.Unquote(q)
	rest = rest[len(q):]
	if rest == "" {
		return m, nil
	}
	if rest[0] != ' ' {
		return m, fmt.Errorf("want a space after the name: %q", t)
	}
	d, err := strconv.Unquote(rest[1:])
	if err != nil {
		return m, fmt.Errorf("data: %w", err)
	}
	m.small = []byte(d)
	return m, nil
}
