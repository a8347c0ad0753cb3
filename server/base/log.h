/*
 * log: one line per event on stderr, in the form journald keeps well: a
 * syslog priority prefix ("<6>") that journald turns into the PRIORITY
 * field, then "event=NAME key=value ...".  Safe from any thread (one write
 * per line).  Only server/ logs; core/ returns messages.
 */
#ifndef RC_LOG_H
#define RC_LOG_H

enum { LOG_P_ERR = 3, LOG_P_WARNING = 4, LOG_P_NOTICE = 5, LOG_P_INFO = 6, LOG_P_DEBUG = 7 };

void rlog(int prio, const char *event, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* s made safe inside a quoted value (key="..."): '"' and '\\' escaped with a
 * backslash, control bytes written \xHH, cut at 400 bytes.  Any text that
 * may come from outside (error messages echo what a client sent) goes
 * through it, so that no value can close its quotes and forge fields or
 * lines.  The result lives in a ring of this thread's buffers: valid until
 * the fourth call after it in the same thread. */
const char *rlog_q(const char *s);

#endif
