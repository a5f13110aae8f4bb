/* exit.h - the selfplay program's exit statuses, shared by the driver and the
 * code of other ranks (ranks.c, trainrank.c, job.c), which return them from
 * their loops without needing the driver.
 *
 * Owns: the status numbers. Does not own: what ends a run (selfplay/driver.h
 * says when each is returned).
 */
#ifndef KOMA_SELFPLAY_EXIT_H
#define KOMA_SELFPLAY_EXIT_H

enum { SP_EXIT_DONE = 0, SP_EXIT_ERROR = 1, SP_EXIT_USAGE = 2, SP_EXIT_INTERRUPTED = 130 };

#endif
