package tar

// data is sample i's bytes, for tests of local shards (a remote
// sample's pooled buffer is not released).
func (t *source) data(i int64) []byte {
	d, _, _ := t.member(i)
	return d
}
