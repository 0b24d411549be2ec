package pgdriver

import (
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"
)

// TestUUIDStringsEncodeInBinary: with the ledger's registration, ids given
// as strings are encoded as binary uuids, alone and in arrays, without the
// failed attempt pgx makes otherwise.
func TestUUIDStringsEncodeInBinary(t *testing.T) {
	const id = "0190b1f2-7a7c-7000-8000-00000000002a"
	plain := pgtype.NewMap()
	_, err := plain.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, id, nil)
	require.Error(t, err, "pgx alone has no binary plan for a string; if it has one now, registerUUID can go")

	m := pgtype.NewMap()
	registerUUID(m)
	b, err := m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, id, nil)
	require.NoError(t, err)
	require.Equal(t, []byte{0x01, 0x90, 0xb1, 0xf2, 0x7a, 0x7c, 0x70, 0, 0x80, 0, 0, 0, 0, 0, 0, 0x2a}, b)

	arr, err := m.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, pgtype.FlatArray[string]{id, id}, nil)
	require.NoError(t, err)
	var back []string
	require.NoError(t, m.Scan(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, arr, &back))
	require.Equal(t, []string{id, id}, back)

	_, err = m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, "not-a-uuid", nil)
	require.Error(t, err, "a malformed id is not sent as binary")
}
