// Package inspect implements `loaderd inspect`: what a dataset holds
// (count, classes and their counts, sample shape, bytes) and a PNG contact
// sheet of a few samples, as stored or after augmentation, so a person can
// look at what the pipeline produces. For images of varying size
// (size=any) it reports the spread of sizes and draws each image scaled
// to fit its cell, or after augmentation that opens with a resize or crop.
//
// Run and ContactSheet are safe for concurrent use.
package inspect
