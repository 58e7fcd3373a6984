package loader

// tenant is the loaders of one Config.Tenant (a client connection, say)
// that have queued chunks. Workers take chunks round-robin over tenants,
// then round-robin over a tenant's loaders: a client that opens a hundred
// streams gets the workers' time one client gets, not a hundred times
// it, so it cannot starve the others by opening streams. Guarded by
// Pool.mu.
type tenant struct {
	key     any
	loaders []*Loader
	rr      int
}

// tenantKey is what l is scheduled by: its Config.Tenant, or l itself
// when it has none (each such loader a tenant of its own).
func (l *Loader) tenantKey() any {
	if l.cfg.Tenant != nil {
		return l.cfg.Tenant
	}
	return l
}

// activateLocked puts l, which has just had work queued, in its
// tenant's turn. The caller holds p.mu.
func (p *Pool) activateLocked(l *Loader) {
	if l.active {
		return
	}
	l.active = true
	k := l.tenantKey()
	t := p.byTenant[k]
	if t == nil {
		t = &tenant{key: k}
		p.byTenant[k] = t
		p.tenants = append(p.tenants, t)
	}
	t.loaders = append(t.loaders, l)
}

// Demoter is implemented by a Config.Tenant whose standing can drop: the
// daemon's client connection, demoted while it resets streams faster
// than a client does (a rapid-reset flood). A demoted tenant's loaders
// get workers only when no other tenant has queued work, so the streams
// such a flood manages to open cannot take the workers from the others.
// Demoted must be quick and safe for concurrent use.
type Demoter interface {
	Demoted() bool
}

func demoted(k any) bool {
	d, ok := k.(Demoter)
	return ok && d.Demoted()
}

// nextLocked picks the loader whose chunk a worker takes next, advancing
// both turns, and reports whether there is one: the next tenant in turn
// that is not demoted, else the next in turn. The caller holds p.mu.
func (p *Pool) nextLocked() (*Loader, bool) {
	if len(p.tenants) == 0 {
		return nil, false
	}
	if p.rr >= len(p.tenants) {
		p.rr = 0
	}
	for i := range p.tenants {
		if j := (p.rr + i) % len(p.tenants); !demoted(p.tenants[j].key) {
			p.rr = j
			break
		}
	}
	t := p.tenants[p.rr]
	if t.rr >= len(t.loaders) {
		t.rr = 0
	}
	l := t.loaders[t.rr]
	p.rr++
	t.rr++
	return l, true
}

// deactivateLocked takes l, whose queue is empty or withdrawn, out of
// the turns. The caller holds p.mu.
func (p *Pool) deactivateLocked(l *Loader) {
	if !l.active {
		return
	}
	l.active = false
	k := l.tenantKey()
	t := p.byTenant[k]
	i := index(t.loaders, l)
	t.loaders = remove(t.loaders, i)
	if i < t.rr {
		t.rr-- // the loader after it keeps its turn
	}
	if len(t.loaders) > 0 {
		return
	}
	delete(p.byTenant, k)
	j := index(p.tenants, t)
	p.tenants = remove(p.tenants, j)
	if j < p.rr {
		p.rr--
	}
}

func index[T comparable](s []T, v T) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// remove deletes s[i], keeping the order, and clears the freed element.
func remove[T any](s []T, i int) []T {
	copy(s[i:], s[i+1:])
	var zero T
	s[len(s)-1] = zero
	return s[:len(s)-1]
}
