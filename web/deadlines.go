package web

import (
	"net/http"
	"time"
)

// DefaultWriteTimeout is how long a client has to read its whole answer
// (SPEC, Running it: a client that does not read its answer within 30 s is
// dropped).
const DefaultWriteTimeout = 30 * time.Second

// writeWithin gives a long-lived answer (an event stream) another d to
// write its next part: the server's write deadline would otherwise end the
// stream however well its client reads. A client that stops reading is
// still dropped d after its last write began.
func writeWithin(w http.ResponseWriter, d time.Duration) {
	// A writer that cannot take deadlines (a test recorder) has none to
	// push back.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
}
