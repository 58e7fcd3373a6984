// Package pinned implements loaderd's batch memory: one large region,
// mapped once and pre-faulted (MADV_POPULATE_WRITE plus one touch a page),
// mlocked where the limit allows, and cut into fixed page-aligned slots
// that are leased and released explicitly.
//
// Locking: New tries mlock unless Config.NoLock. Root (CAP_IPC_LOCK) can
// lock any size; other processes are held to RLIMIT_MEMLOCK. When mlock
// fails the pool logs one slog warning per process and uses pageable
// memory; Pool.Locked and Stats say which is in force.
//
// Leasing: Lease blocks until a slot is free, the context is done or the
// pool is closed; TryLease never blocks. A slot is never handed out again
// while it is leased. Every lease of slot i has a generation (Slot.Gen,
// counting from 1), and a release names (index, generation): a double
// release, a stale handle or a stale client ack returns ErrNotLeased and
// changes nothing. Handles are preallocated (HandleRing per slot) so Lease
// and Release allocate nothing; the price is that a *Slot kept past its
// Release is only caught while its slot has been re-leased fewer than
// HandleRing times. ReleaseIndex checks the full generation.
//
// Sharing: with Config.Shared the region is a sealed memfd (it cannot be
// shrunk or grown), so a batch crosses to a client on the same host as
// (offset, length) instead of a copy. The daemon passes Pool.Fd over a Unix
// socket (SCM_RIGHTS); the client maps it with Map and acks (index, gen).
//
// Closing: Close fails with ErrBusy while any slot is leased. CloseForce
// closes anyway and unmaps when the last leased slot comes back, never
// under a holder. After either, Lease returns ErrClosed and blocked Leases
// wake with it.
//
// Outside Linux the region is plain Go memory: never locked, never shared.
//
// Concurrency: Pool and Slot methods are safe for concurrent use; a Slot's
// Bytes belong to whoever holds the lease. Region is safe for concurrent
// use.
package pinned
