package views

import (
	"strconv"
	"time"
)

// timeAbs is the absolute form of a time: RFC 3339 in UTC.
func timeAbs(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// timeRel says how long ago (or how far ahead) t is.
func timeRel(t, now time.Time) string {
	d := now.Sub(t)
	ahead := d < 0
	if ahead {
		d = -d
	}
	var s string
	switch {
	case d < 5*time.Second:
		return "just now"
	case d < time.Minute:
		s = strconv.Itoa(int(d.Seconds())) + " s"
	case d < time.Hour:
		s = strconv.Itoa(int(d.Minutes())) + " min"
	case d < 48*time.Hour:
		s = strconv.Itoa(int(d.Hours())) + " h"
	default:
		s = strconv.Itoa(int(d.Hours()/24)) + " d"
	}
	if ahead {
		return "in " + s
	}
	return s + " ago"
}
