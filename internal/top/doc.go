// Package top implements `loaderd top`: a live terminal view of a running
// daemon, read from its Prometheus endpoint (--metrics-listen). It scrapes
// /metrics twice an interval apart and turns counters into rates: per
// stream images/s, the share of time its client waited for batches and how
// full its window is; per dataset images/s, decoded-cache hit rate and
// size; the workers busy and the --workers auto setting.
//
// It reads only the text the daemon already exports, so it works against
// any daemon it can reach over HTTP, and needs no second API. Scrape and
// Render are safe for concurrent use; a Frame is an immutable value.
package top
