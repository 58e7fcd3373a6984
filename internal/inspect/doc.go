// Package inspect implements `loaderd inspect`: what a dataset holds
// (count, classes and their counts, sample shape, bytes) and a PNG contact
// sheet of a few samples, as stored or after augmentation, so a person can
// look at what the pipeline produces.
//
// Run and ContactSheet are safe for concurrent use.
package inspect
