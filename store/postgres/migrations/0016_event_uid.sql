-- 0016: each event's random identity (docs/notifications.md, "Headers").
-- An event's ID is a sequence number: a database restored from a backup,
-- or another database, hands the same numbers out again, so a webhook-id
-- made of it repeated, and receivers dropped new events as duplicates.
-- uid is drawn by the column's default when the event is appended, so the
-- events a backup holds keep theirs and every later event gets a new one.
-- Events appended before this migration keep '' (the column is added with
-- a constant default, which rewrites no row) and their old webhook-id,
-- msg_<id>, which was what receivers had seen for them.
ALTER TABLE events ADD COLUMN IF NOT EXISTS uid text NOT NULL DEFAULT '';
ALTER TABLE events ALTER COLUMN uid SET DEFAULT replace(gen_random_uuid()::text, '-', '');
