package pgdriver

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Ids travel as strings in Go. pgx has no binary encoding of a string as a
// uuid: for each such parameter it builds an error, then falls back to
// text. On the ledger's hot statements that was several percent of the
// server's CPU, so every connection learns to send a string as a binary
// uuid (a malformed one still falls back to text, where PostgreSQL names
// the problem).

// registerTypes is run on every new PostgreSQL connection.
func registerTypes(_ context.Context, conn *pgx.Conn) error {
	registerUUID(conn.TypeMap())
	return nil
}

func registerUUID(m *pgtype.Map) {
	uuidType := &pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}}
	m.RegisterType(uuidType)
	m.RegisterType(&pgtype.Type{Name: "_uuid", OID: pgtype.UUIDArrayOID, Codec: &pgtype.ArrayCodec{ElementType: uuidType}})
}

// uuidCodec is pgx's uuid codec that also encodes a string in binary.
type uuidCodec struct{ pgtype.UUIDCodec }

func (c uuidCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(string); ok && format == pgtype.BinaryFormatCode {
		return uuidStringPlan{}
	}
	return c.UUIDCodec.PlanEncode(m, oid, format, value)
}

type uuidStringPlan struct{}

func (uuidStringPlan) Encode(value any, buf []byte) ([]byte, error) {
	u, err := uuid.Parse(value.(string))
	if err != nil {
		return nil, err
	}
	return append(buf, u[:]...), nil
}
