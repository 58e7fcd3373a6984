// Package srccheck implements checks over loaderd's own source tree: that
// every source file (Go, assembly, C and CUDA, Python, shell) is the
// project's own, carrying no other project's ownership notice or licence
// tag. Its test walks the repository and fails naming each file that
// does; a file taken from elsewhere has to be rewritten, not kept.
//
// Root finds the repository from any directory inside it, Checked says
// which files are sources to look at, Marks finds the offending lines of
// one file's contents, and Scan puts them together over a tree.
package srccheck
