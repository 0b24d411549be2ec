// Package models holds the gorm structs that mirror Arbiter's tables. It has
// no logic and no queries: the schema lives in migrations/, and every read and
// write lives in services/.
package models
