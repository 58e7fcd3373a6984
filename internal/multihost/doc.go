// Package multihost holds the tests that play a pool of loaderd hosts on
// one machine: three daemons and a trainer, each in a Linux network
// namespace of its own joined by a bridge, so that a daemon can be killed,
// hung, cut off or slowed as a real host would be while the trainer's pool
// client spreads one rank's stream over them and must still deliver the
// epoch a single daemon delivers, byte for byte. It has no API.
//
// The tests need root, ip(8) and network namespaces; they skip without
// them, under -short, and under -race (they time real processes, and the
// pool client's own race tests live in client/).
package multihost
