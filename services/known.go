package services

import "sync"

// Keys known to exist: an intent does not know whether its key is new, and
// a new one is cheapest written first (group commit, group.go) while one
// whose key exists is answered from the stored action. An intent for a key
// this process has just created or read is most likely a retry (a replay,
// or an agent asking again while the first attempt runs), so it goes
// straight to the read, instead of waiting for a group's commit to learn
// that its key exists. The set only chooses the route: an entry whose key
// has gone since (retention) is created by the read path as well.
//
// The set is bounded: two generations of knownKeysGeneration keys each;
// when the newer fills, the older is dropped.

const knownKeysGeneration = 1 << 15

type knownKeys struct {
	mu       sync.Mutex
	cur, old map[knownKey]struct{}
}

type knownKey struct{ namespace, key string }

// has reports whether the key was seen recently.
func (k *knownKeys) has(namespace, key string) bool {
	s := knownKey{namespace, key}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.cur[s]; ok {
		return true
	}
	_, ok := k.old[s]
	return ok
}

// add notes that a key exists.
func (k *knownKeys) add(namespace, key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.addLocked(namespace, key)
}

func (k *knownKeys) addLocked(namespace, key string) {
	if k.cur == nil || len(k.cur) >= knownKeysGeneration {
		k.old, k.cur = k.cur, make(map[knownKey]struct{}, 1024)
	}
	k.cur[knownKey{namespace, key}] = struct{}{}
}
