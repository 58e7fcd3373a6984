// Package bytesize implements the byte counts loaderd's commands print and
// take: Format writes one in the largest binary unit that keeps it
// readable, Parse reads sizes such as 2GiB, 512MiB, 1.5G or 1048576. Its
// functions are safe for concurrent use.
package bytesize

import (
	"fmt"
	"strconv"
	"strings"
)

// Format prints n as B, KiB, MiB or GiB.
func Format(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// Parse parses a size: a number of bytes, optionally with KiB, MiB, GiB
// or TiB (or K, M, G, T, B).
func Parse(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSuffix(t, u.suffix), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || v < 0 || v*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("size %q: want a number of bytes, optionally with KiB, MiB, GiB or TiB", s)
	}
	return int64(v * float64(mult)), nil
}
