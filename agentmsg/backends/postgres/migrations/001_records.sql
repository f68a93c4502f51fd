-- agentmsg schema 1: every journal of every collaboration in one append-only table.
-- A row holds one sealed record exactly as the file store writes it (canonical JSON text),
-- plus a few columns copied out of it for lookups.  Rows are never updated or deleted.

CREATE TABLE agentmsg_collabs (
    id      uuid PRIMARY KEY,
    cseq    bigint NOT NULL DEFAULT 0,          -- the collaboration-wide order of events, messages and notes
    created timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE agentmsg_records (
    collab   uuid   NOT NULL REFERENCES agentmsg_collabs (id),
    stream   text   NOT NULL,                   -- events | notes | delivery | inbox/<alias> | receipts/<alias>
    seq      bigint NOT NULL CHECK (seq > 0),
    body     text   NOT NULL,                   -- the sealed record, canonical JSON
    rtype    text,                              -- the record's "type"
    mid      text,                              -- a message's id (inbox streams)
    ref      text,                              -- the message a receipt is about (receipts streams)
    kind     text,
    priority text,
    bcast    text,                              -- a broadcast copy's base id
    sender   text,                              -- a message's sender alias; an event's alias
    author   name   NOT NULL DEFAULT session_user,
    PRIMARY KEY (collab, stream, seq)
);

CREATE UNIQUE INDEX agentmsg_records_mid ON agentmsg_records (collab, mid) WHERE mid IS NOT NULL;
CREATE INDEX agentmsg_records_mid_any ON agentmsg_records (mid) WHERE mid IS NOT NULL;
CREATE INDEX agentmsg_records_ref ON agentmsg_records (collab, stream, ref) WHERE ref IS NOT NULL;
CREATE INDEX agentmsg_records_bcast ON agentmsg_records (collab, bcast) WHERE bcast IS NOT NULL;

-- History is append-only: no role, owner included, may rewrite or remove a record.
CREATE FUNCTION agentmsg_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'agentmsg history is append-only (% refused)', TG_OP USING ERRCODE = 'insufficient_privilege';
END $$;

CREATE TRIGGER agentmsg_records_append_only BEFORE UPDATE OR DELETE ON agentmsg_records
    FOR EACH ROW EXECUTE FUNCTION agentmsg_refuse_change();
CREATE TRIGGER agentmsg_records_no_truncate BEFORE TRUNCATE ON agentmsg_records
    FOR EACH STATEMENT EXECUTE FUNCTION agentmsg_refuse_change();

-- Store, then notify: one channel per collaboration, delivered when the transaction commits.
CREATE FUNCTION agentmsg_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('agentmsg_' || replace(NEW.collab::text, '-', ''), NEW.stream || ' ' || NEW.seq);
    RETURN NULL;
END $$;

CREATE TRIGGER agentmsg_records_notify AFTER INSERT ON agentmsg_records
    FOR EACH ROW EXECUTE FUNCTION agentmsg_notify();
