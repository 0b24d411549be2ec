package views

import (
	"strings"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// viaText says, after a person's name, through which API key they decided
// (" via API key on-call"); nothing for the dashboard, the usual way, nor
// for a key without an owner, which actorName already names.
func viaText(a record.Actor) string {
	key, ok := strings.CutPrefix(a.Via, "api_key:")
	switch {
	case ok && key == a.Name:
		return ""
	case ok:
		return " via API key " + key
	}
	return ""
}

// actorName is the actor as a person reads it: an ownerless key is
// "API key on-call", never a name that could pass for a person's.
func actorName(a record.Actor) string {
	if key, ok := strings.CutPrefix(a.Via, "api_key:"); ok && key == a.Name {
		return "API key " + key
	}
	return a.Name
}
