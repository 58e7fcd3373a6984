package objstore

// SetFills sets how many objects c fills at once.
func SetFills(c *Cache, n int) { c.par = n }
