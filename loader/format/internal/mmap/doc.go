// Package mmap implements the read-only file mappings of the formats that
// serve samples as views of their files (cifar, tar, arrow) or read them
// once (parquet). Map and Unmap are safe for concurrent use; a mapping is
// read-only, so any number of goroutines may read it until it is unmapped.
package mmap
