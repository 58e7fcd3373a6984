package tar

import (
	"strconv"
	"strings"

	"github.com/loaderd/loaderd/loader/format/internal/options"
	"github.com/loaderd/loaderd/sampler"
)

// orderWindow reads order=: uniform (the default: 0), or shards[:W], the
// shard-shuffle order mixing W shards at a time (sampler.DefaultWindow).
func orderWindow(o *options.Options) (int, error) {
	v := o.Str("order", "uniform")
	if v == "uniform" {
		return 0, nil
	}
	rest, ok := strings.CutPrefix(v, "shards")
	if !ok || rest != "" && rest[0] != ':' {
		return 0, o.Errorf("order=%s: want uniform, shards or shards:WINDOW", v)
	}
	if rest == "" {
		return sampler.DefaultWindow, nil
	}
	w, err := strconv.Atoi(rest[1:])
	if err != nil || w < 1 {
		return 0, o.Errorf("order=%s: the window is a number of shards, 1 or more", v)
	}
	return w, nil
}

// runs lists the samples' shards as runs of consecutive indices: one per
// shard for the WebDataset layout, one per shard and class (or fewer) for
// the folder layout.
func (t *source) runs() []sampler.Run {
	var out []sampler.Run
	for i, s := range t.samples {
		if n := len(out); n > 0 && out[n-1].Shard == s.shard {
			out[n-1].Len++
			continue
		}
		out = append(out, sampler.Run{Start: int64(i), Len: 1, Shard: s.shard})
	}
	return out
}

// ShardOrder implements loader.ShardOrderer: the shard-shuffle order of
// order=shards[:W], or nil (the sampler's uniform order).
func (t *source) ShardOrder() *sampler.Shards { return t.order }
