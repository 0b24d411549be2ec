package services

import (
	"context"
	"encoding/json"
	"time"
)

// The outbox: alerts are written as webhook messages in the same statement
// (PostgreSQL) or transaction (SQLite) as the ledger change that causes them,
// and fanned out to every enabled endpoint that subscribes to the event type
// and the action's namespace. A crash can neither lose an alert for a
// committed change nor send one for a change that was rolled back.

// EventTest is the event of a test message sent from the dashboard or API.
const EventTest = "webhook.test"

// EventTypes lists every event an endpoint can subscribe to.
var EventTypes = []string{EventTimedOut, EventDecided, EventKeyReused, EventStaleOutcome,
	EventLateResult, EventCompensated, EventFailed, EventTest}

// outboxMessage is one alert about to be written.
type outboxMessage struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// MessageBody is the standard webhook body.
type MessageBody struct {
	Type      string      `json:"type"`
	Timestamp time.Time   `json:"timestamp"`
	Data      MessageData `json:"data"`
}

// MessageData is the body's data: the action after the change and the entry
// that recorded it; decisions add who decided what and why.
type MessageData struct {
	Action   *Action       `json:"action,omitempty"`
	Entry    *Entry        `json:"entry,omitempty"`
	Decision *DecisionInfo `json:"decision,omitempty"`
	Endpoint *string       `json:"endpoint_id,omitempty"`
}

// DecisionInfo is data.decision of action.decided.
type DecisionInfo struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	Operator string `json:"operator"`
}

// outboxFor builds the messages of a change. act is the action as it will be
// stored; the entry's seq is filled in by the database (it is assigned by the
// same statement).
func outboxFor(ch *change, act *Action) []outboxMessage {
	if len(ch.events) == 0 {
		return nil
	}
	out := make([]outboxMessage, 0, len(ch.events))
	for _, ev := range ch.events {
		e := ch.entry
		body := MessageBody{Type: ev, Timestamp: ch.entry.RecordedAt, Data: MessageData{Action: act, Entry: &e}}
		if ev == EventDecided {
			var p struct {
				Decision string `json:"decision"`
				Reason   string `json:"reason"`
			}
			_ = json.Unmarshal(e.Payload, &p)
			body.Data.Decision = &DecisionInfo{Decision: p.Decision, Reason: p.Reason, Operator: e.Actor.Name}
		}
		raw, err := json.Marshal(body)
		if err != nil {
			panic("outbox: marshal message: " + err.Error())
		}
		out = append(out, outboxMessage{ID: newID(), Type: ev, Payload: raw})
	}
	return out
}

// withSeq returns the message with data.entry.seq set.
func (m outboxMessage) withSeq(seq int) []byte {
	var body MessageBody
	if err := json.Unmarshal(m.Payload, &body); err != nil || body.Data.Entry == nil {
		return m.Payload
	}
	body.Data.Entry.Seq = seq
	raw, _ := json.Marshal(body)
	return raw
}

// insertMessageSQLite writes one message and its deliveries inside the
// ledger change's transaction. A message no endpoint subscribes to is not
// written: nothing would ever read it.
func insertMessageSQLite(ctx context.Context, tx dbtx, m outboxMessage, act *Action, seq int, now time.Time) error {
	endpoints, err := subscribersSQLite(ctx, tx, m.Type, act.Namespace)
	if err != nil || len(endpoints) == 0 {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_messages (id, event_type, namespace, action_id, payload,
		created_at) VALUES (?, ?, ?, ?, ?, ?)`, m.ID, m.Type, act.Namespace, act.ID, string(m.withSeq(seq)), now); err != nil {
		return err
	}
	for _, ep := range endpoints {
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_deliveries (id, message_id, endpoint_id, state,
			attempts, next_attempt_at, created_at, updated_at) VALUES (?, ?, ?, 'pending', 0, ?, ?, ?)`,
			newID(), m.ID, ep, now, now, now); err != nil {
			return err
		}
	}
	return nil
}

// subscribersSQLite returns the enabled endpoints that subscribe to the
// event type and the namespace.
func subscribersSQLite(ctx context.Context, tx dbtx, eventType, namespace string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id FROM webhook_endpoints w WHERE w.enabled
		AND EXISTS (SELECT 1 FROM json_each(w.event_types) WHERE value = ?)
		AND (json_array_length(w.namespaces) = 0 OR EXISTS (SELECT 1 FROM json_each(w.namespaces) WHERE value = ?))`,
		eventType, namespace)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var endpoints []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		endpoints = append(endpoints, id)
	}
	return endpoints, rows.Err()
}
