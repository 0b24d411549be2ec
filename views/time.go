package views

import (
	"strconv"
	"time"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// timeAbs is the absolute form of a time: RFC 3339 in UTC.
func timeAbs(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// timeNow is the server's time as the page was drawn, to the millisecond:
// relative times count on from it (static/app.js), whatever the browser's
// clock says.
func timeNow(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// gapText says how long after the entry before it an entry was recorded
// ("+1.2 s", "+3 min"); "" for the first.
func gapText(prev *record.Entry, e *record.Entry) string {
	if prev == nil {
		return ""
	}
	d := e.RecordedAt.Sub(prev.RecordedAt)
	switch {
	case d < 0:
		return ""
	case d < time.Second:
		return "+" + strconv.Itoa(int(d.Milliseconds())) + " ms"
	case d < time.Minute:
		return "+" + strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	case d < time.Hour:
		return "+" + strconv.Itoa(int(d.Minutes())) + " min"
	case d < 48*time.Hour:
		return "+" + strconv.FormatFloat(d.Hours(), 'f', 1, 64) + " h"
	}
	return "+" + strconv.Itoa(int(d.Hours()/24)) + " d"
}

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
