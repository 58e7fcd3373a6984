package loader

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/loaderd/loaderd/sampler"
)

// npyMagic opens every NumPy .npy file.
const npyMagic = "\x93NUMPY"

// readWeights reads the weights file of sampler=weighted:FILE, which must
// hold exactly n weights, one per sample in the dataset's index order (the
// dataset as opened, after holdout= and part=). Two formats, told apart by
// the first bytes:
//
//   - NumPy .npy (what numpy.save writes): a 1-D array of float32 or
//     float64, either byte order;
//   - text: one number per line (strconv.ParseFloat: 0.5, 1e-3, 2), blank
//     lines and lines starting with # ignored.
//
// Every weight must be finite and ≥ 0, and one at least positive. Errors
// wrap ErrSampler and name the file and the line (text) or index (.npy)
// of the first bad weight.
func readWeights(file string, n int64) ([]float64, error) {
	if n > sampler.MaxWeighted {
		return nil, fmt.Errorf("%w: sampler=weighted:%s: %d samples, at most 2^32", ErrSampler, file, n)
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("%w: sampler=weighted: %w", ErrSampler, err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	var w []float64
	if head, _ := r.Peek(len(npyMagic)); string(head) == npyMagic {
		w, err = readNpy(r, n)
	} else {
		w, err = readText(r, n)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: weights file %s%w", ErrSampler, file, err)
	}
	for _, x := range w {
		if x > 0 {
			return w, nil
		}
	}
	return nil, fmt.Errorf("%w: weights file %s: all %d weights are zero", ErrSampler, file, n)
}

// readText reads one weight a line. Its errors start with where they
// are, ":LINE: " or ": ", to follow the file name.
func readText(r io.Reader, n int64) ([]float64, error) {
	w := make([]float64, 0, min(n, 1<<20))
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		if int64(len(w)) == n {
			return nil, fmt.Errorf(":%d: more than the dataset's %d weights", line, n)
		}
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf(":%d: %q is not a number", line, s)
		}
		if err := checkWeight(x); err != nil {
			return nil, fmt.Errorf(":%d: %w", line, err)
		}
		w = append(w, x)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf(":%d: %w", line+1, err)
	}
	if int64(len(w)) != n {
		return nil, fmt.Errorf(": %d weights for the dataset's %d samples", len(w), n)
	}
	return w, nil
}

var (
	npyDescr = regexp.MustCompile(`'descr':\s*'([<>|=])f([48])'`)
	npyShape = regexp.MustCompile(`'shape':\s*\((\d+),?\)`)
)

// readNpy reads a .npy file of a 1-D float32 or float64 array: magic,
// version, header length (2 bytes in version 1, 4 in 2 and 3), a Python
// dict literal naming descr, fortran_order and shape, then the data.
func readNpy(r *bufio.Reader, n int64) ([]float64, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return nil, fmt.Errorf(": .npy preamble: %w", err)
	}
	var hlen int
	switch pre[6] {
	case 1:
		var b [2]byte
		_, err := io.ReadFull(r, b[:])
		if err != nil {
			return nil, fmt.Errorf(": .npy header: %w", err)
		}
		hlen = int(binary.LittleEndian.Uint16(b[:]))
	case 2, 3:
		var b [4]byte
		_, err := io.ReadFull(r, b[:])
		if err != nil {
			return nil, fmt.Errorf(": .npy header: %w", err)
		}
		hlen = int(binary.LittleEndian.Uint32(b[:]))
	default:
		return nil, fmt.Errorf(": .npy version %d.%d, want 1, 2 or 3", pre[6], pre[7])
	}
	if hlen > 1<<16 {
		return nil, fmt.Errorf(": .npy header of %d bytes", hlen)
	}
	header := make([]byte, hlen)
	if _, err := io.ReadFull(r, header); err != nil {
		return nil, fmt.Errorf(": .npy header: %w", err)
	}
	d := npyDescr.FindSubmatch(header)
	s := npyShape.FindSubmatch(header)
	if d == nil || s == nil {
		return nil, fmt.Errorf(": .npy header %s: want a 1-D array of float32 or float64", bytes.TrimSpace(header))
	}
	if m, err := strconv.ParseInt(string(s[1]), 10, 64); err != nil || m != n {
		return nil, fmt.Errorf(": %s weights for the dataset's %d samples", s[1], n)
	}
	var order binary.ByteOrder = binary.LittleEndian
	if d[1][0] == '>' {
		order = binary.BigEndian
	}
	size := int(d[2][0] - '0')
	w := make([]float64, n)
	var b [8]byte
	for i := range w {
		if _, err := io.ReadFull(r, b[:size]); err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf(": weight %d of %d: %w", i, n, ErrTruncated)
		} else if err != nil {
			return nil, fmt.Errorf(": weight %d of %d: %w", i, n, err)
		}
		if size == 4 {
			w[i] = float64(math.Float32frombits(order.Uint32(b[:4])))
		} else {
			w[i] = math.Float64frombits(order.Uint64(b[:]))
		}
		if err := checkWeight(w[i]); err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
	}
	return w, nil
}
