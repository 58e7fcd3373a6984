package objstore

import "errors"

// A Bounded set streams its objects through the cache (see Set). Its
// clock is the format's: Tick once per batch planned, Touch each object
// the batch reads. An object may be let go (evict) only if the format
// last touched it before the object to fill was asked for: in a
// shard-shuffle order that is a window already planned, and in an order
// that touches every object all the time (uniform) nothing is, so a
// fill that finds no room leaves its object to ranged reads instead of
// trading one needed object for another.

// releasing marks an object being let go: neither filled nor pending.
const releasing fillState = filled + 1

// Bounded reports whether the objects do not fit the cache together, so
// that the set streams them through it.
func (s *Set) Bounded() bool { return s.bounded }

// Bytes returns the objects' total size.
func (s *Set) Bytes() int64 { return s.total }

// CacheLimit returns the bound of the cache the set fills (--cache-bytes).
func (s *Set) CacheLimit() int64 { return s.cache.Limit }

// CacheDir returns the directory of the cache the set fills.
func (s *Set) CacheDir() string { return s.cache.Dir }

// Tick advances the set's clock (once per batch the format is told of)
// and returns it.
func (s *Set) Tick() int64 { return s.clock.Add(1) }

// Touch records that the batch of the current clock reads object k.
// It allocates nothing and takes no lock.
func (s *Set) Touch(k int) {
	if s.bounded {
		s.stamps[k].Store(s.clock.Load())
	}
}

// Hold reports whether object k's complete copy is in the cache, and
// then takes it as filled (Start will not fill it, nor call done for it)
// and, for a Bounded set, keeps it there (pinned) until the set lets it
// go: the format maps it at open.
func (s *Set) Hold(k int) bool {
	one := s.paths[k : k+1]
	if s.bounded {
		s.cache.pin(one, 1)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state[k] != pending || !s.Cached(k) {
		if s.bounded {
			s.cache.pin(one, -1)
		}
		return false
	}
	s.state[k] = filled
	if s.bounded {
		s.held[k] = true
	}
	return true
}

// fillBounded fills object k, pinned from before its fill until it is let
// go, letting others go while the cache has no room for it.
func (s *Set) fillBounded(k int) error {
	one := s.paths[k : k+1]
	s.cache.pin(one, 1)
	for {
		_, err := s.cache.ensure(s.ctx, s.cl, s.Objects[k], s.paths[k])
		full := errors.Is(err, ErrCacheFull)
		v := -1
		if full && s.evict != nil && s.ctx.Err() == nil && s.Objects[k].Size <= s.cache.Limit {
			v = s.victim(k)
		}
		if v >= 0 {
			s.evict(v)
			s.cache.pin(s.paths[v:v+1], -1)
			s.mu.Lock()
			s.state[v] = pending
			s.mu.Unlock()
			continue
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		switch {
		case err == nil:
			s.state[k], s.held[k] = filled, true
			return nil
		case full && s.evict != nil: // room may come: Want asks again
			s.state[k], s.failed[k] = pending, s.clock.Load()
		default: // ranged reads for the rest of the open
			s.state[k] = filled
		}
		s.cache.pin(one, -1)
		return err
	}
}

// victim picks the held object touched least recently, before k was
// asked for, and marks it releasing; -1 if none.
func (s *Set) victim(k int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, best := -1, s.asked[k]
	for j, h := range s.held {
		if st := s.stamps[j].Load(); h && j != k && st < best {
			v, best = j, st
		}
	}
	if v >= 0 {
		s.held[v], s.state[v] = false, releasing
	}
	return v
}
