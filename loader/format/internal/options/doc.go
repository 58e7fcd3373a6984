// Package options implements the FORMAT:PATH?KEY=VALUE&… syntax the
// formats under loader/format share: parsing and checking the keys, the
// options several formats take (size=, maxpixels=, resize=), and the
// expansion of a sharded PATH (a file, a directory or a glob). Its errors
// start with FORMAT:PATH, the name the user typed. An Options is read-only
// once parsed and safe for concurrent use.
package options
