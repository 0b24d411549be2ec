package services

import (
	"encoding/json"
	"time"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// The outbox: alerts are written as webhook messages with the ledger change
// that causes them (by the driver, in the change's own statement or
// transaction), and fanned out to every enabled endpoint that subscribes to
// the event type and the action's namespace. A crash can neither lose an
// alert for a committed change nor send one for a change that was rolled
// back.

// MessageBody is the standard webhook body.
type MessageBody struct {
	Type      record.EventType `json:"type"`
	Timestamp time.Time        `json:"timestamp"`
	Data      MessageData      `json:"data"`
}

// MessageData is the body's data: the action after the change and the entry
// that recorded it; decisions add who decided what and why.
type MessageData struct {
	Action   *record.Action `json:"action,omitempty"`
	Entry    *record.Entry  `json:"entry,omitempty"`
	Decision *DecisionInfo  `json:"decision,omitempty"`
	Endpoint *string        `json:"endpoint_id,omitempty"`
	// Freeze is the freeze of freeze.started and freeze.lifted.
	Freeze *record.Freeze `json:"freeze,omitempty"`
}

// DecisionInfo is data.decision of action.decided.
type DecisionInfo struct {
	Decision record.Decision `json:"decision"`
	Reason   string          `json:"reason"`
	Operator string          `json:"operator"`
}

// alertsFor builds the messages of a change. act is the action as it will
// be stored; the entry's seq is filled in by the driver (the same write
// assigns it). Each message body is marshalled only when a driver asks for
// it (driver.Alert.Body): a write that no endpoint can receive never builds
// one. The body is the entry and the action as they are now, whenever it is
// built.
func alertsFor(events []record.EventType, e *record.Entry, act *record.Action) []driver.Alert {
	if len(events) == 0 {
		return nil
	}
	entry, snap := *e, *act
	out := make([]driver.Alert, 0, len(events))
	for _, ev := range events {
		out = append(out, driver.Alert{ID: newID(), Type: ev, Build: func() json.RawMessage {
			return messageBody(ev, entry, snap)
		}})
	}
	return out
}

// messageBody is the body of one alert about entry and the action act.
func messageBody(ev record.EventType, entry record.Entry, act record.Action) json.RawMessage {
	body := MessageBody{Type: ev, Timestamp: entry.RecordedAt, Data: MessageData{Action: &act, Entry: &entry}}
	if ev == record.EventDecided {
		if p, err := record.DecodePayload(&entry); err == nil {
			if d, ok := p.(*record.DecisionPayload); ok {
				body.Data.Decision = &DecisionInfo{Decision: d.Decision, Reason: d.Reason, Operator: entry.Actor.Name}
			}
		}
	}
	raw, err := json.Marshal(body)
	if err != nil {
		panic("outbox: marshal message: " + err.Error())
	}
	return raw
}
