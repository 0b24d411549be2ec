package main

// waiterHeadroom is how many open files are kept for everything but
// waiting requests (ordinary requests, database connections, webhooks,
// log files): at most 1,000, or half the limit when it is small.
func waiterHeadroom(nofile uint64) uint64 { return min(1000, nofile/2) }

// waiterCap is the number of requests that may wait at once: the
// configured maximum, lowered so that waiters never use the descriptors
// of waiterHeadroom. A limit of 0 is unknown and lowers nothing.
func waiterCap(configured int, nofile uint64) int {
	if nofile == 0 {
		return configured
	}
	return int(min(uint64(configured), max(1, nofile-waiterHeadroom(nofile))))
}
