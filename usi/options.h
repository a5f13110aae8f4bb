/* options.h - the engine's USI options: their values, the `option` lines
 * announced after `usi`, and `setoption` checking.
 *
 * Owns: names, types, defaults and ranges of every option, and the rule that
 * a bad value leaves the old one in place with a message saying why.
 * Does not own: what an option does (session.c loads the net, search.c reads
 * the limits), the protocol loop (usi.c).
 *
 * Options (name: USI type, default, meaning):
 *   Net            filename <shipped> weights file (.safetensors), or a run directory:
 *                                   its koma.db's latest model (else the last file in
 *                                   <dir>/models/ or <dir> by name). Default: the net
 *                                   that ships with Koma (eval.h: usi_net_shipped), or
 *                                   <empty> when none was found. `none`: no net, a
 *                                   uniform policy and zero value (legal moves only;
 *                                   for tests). A net that cannot be used is an error.
 *   Backend        combo   auto     cpu | cuda | auto (cuda when a device is present)
 *   Threads        spin    CPUs     CPU threads of the cpu backend's BLAS (1..1024)
 *   BatchSize      spin    32       leaves per network batch (1..1024)
 *   NodeLimit      spin    0        visits per move; 0 = time only (0..2147483647)
 *   NetworkDelay   spin    -1       ms of lag a move costs beyond the search, kept
 *                                   back on every timed move (-1..60000); -1, the
 *                                   default: a tenth of the move's time, at most
 *                                   120 ms (mcts/timeman.h); the old name
 *                                   ByoyomiMargin sets it and NetworkDelay2
 *   NetworkDelay2  spin    -1       ms kept back when a move uses the clock to its
 *                                   end (byoyomi only left) (-1..60000); -1: a
 *                                   tenth of it, at most 300 ms. A value set is
 *                                   kept back in full, whatever the clock
 *   MinimumThinkingTime spin 0      ms a timed move thinks at least (soft limit;
 *                                   never past the hard one) (0..60000)
 *   ResignThreshold string 0        resign when the chosen move's win probability
 *                                   (1 + Q) / 2 is below this (0..1); 0 = never
 *   USI_Ponder     check   false    ponder on the predicted reply (GUI-managed);
 *                                   false: bestmove names no ponder move
 *   USI_Hash       spin    256      MiB for the search tree (+1/8 for the result cache)
 *   MaxPly         spin    320      game length the search scores as a draw; 0 = none
 *   Search         combo   puct     puct | gumbel (root selection)
 *   LeafMate       combo   1        0 | 1 | 3: a leaf whose side to move mates in
 *                                   this many moves is a win without the network
 *   Contempt       spin    0        per mille: a draw counts as 50% - Contempt/1000
 *                                   for the engine (-500..500)
 *   DfpnNodes      spin    200000   df-pn mate search nodes beside each go's MCTS,
 *                                   on a thread of its own; a proven mate is played
 *                                   and reported as `score mate N`; 0 = off
 *                                   (0..2147483647)
 *   DfpnHash       spin    32       MiB of df-pn's table (go mate and beside the
 *                                   search) (1..65536)
 *   MultiPV        spin    1        info lines `info multipv k ...` for the k most
 *                                   visited root moves (1..32)
 *   EnteringKingRule combo CSARule27 CSARule27 | CSARule24 | NoEnteringKing:
 *                                   the rule by which koma declares a win
 *                                   (`bestmove win`) and the search scores a
 *                                   leaf whose side to move may declare: CSA
 *                                   27-point, 24-point (wins at 31 points
 *                                   only; 24-30, a draw under that rule, is
 *                                   not declared) or none (engine/rules.h)
 *   MovesLeftMaxEffect string 0.0345  lc0's moves-left utility (mcts/mcts.h,
 *   MovesLeftThreshold string 0.8     "Moves left"), with a net that has the
 *   MovesLeftSlope     string 0.0027  moves-left head: prefer the shorter win
 *   MovesLeftConstantFactor string 0  and the longer loss once |Q| passes the
 *   MovesLeftScaledFactor string 1.6521  threshold; MaxEffect 0 = off. lc0's
 *   MovesLeftQuadraticFactor string -0.6521  names, ranges and defaults
 *                                   (the defaults are mcts_params_default's)
 * Names are matched without regard to case; the canonical spelling is used
 * in messages.
 */
#ifndef KOMA_USI_OPTIONS_H
#define KOMA_USI_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config/config.h"
#include "engine/rules.h"
#include "usi/out.h"

typedef struct {
    char net[CFG_STRING_MAX];
    char backend[CFG_STRING_MAX];
    int64_t threads;
    int64_t batch;
    int64_t node_limit;
    int64_t network_delay;   /* NetworkDelay (alias ByoyomiMargin); -1: automatic */
    int64_t network_delay2;  /* NetworkDelay2; -1: automatic */
    int64_t minimum_ms;      /* MinimumThinkingTime */
    double resign;
    int ponder;
    int64_t hash_mb;
    int64_t max_ply;
    char search[CFG_STRING_MAX];
    char leaf_mate[CFG_STRING_MAX];
    int64_t contempt; /* per mille: a draw counts as a 50% - contempt/1000 result for the engine */
    int64_t multipv;
    int64_t dfpn_nodes; /* DfpnNodes: 0 = no df-pn beside the search */
    int64_t dfpn_hash_mb;
    char entering_king[CFG_STRING_MAX];
    double ml_max_effect, ml_threshold, ml_slope; /* MovesLeft*: mcts_params_t's ml_* */
    double ml_constant, ml_scaled, ml_quadratic;
} usi_options_t;

void usi_options_default(usi_options_t *o);
/* EnteringKingRule as the engine's rule (CSARule27 for anything else). */
rules_declare_t usi_options_declare_rule(const usi_options_t *o);
/* Writes the options table (name, USI type, default, range or words, help)
 * for `koma --help`. */
void usi_options_help(const usi_options_t *o, FILE *out);
/* Writes one `option name ...` line per option. */
void usi_options_print(const usi_options_t *o, usi_out_t *out);
/* Applies one setoption. value may be NULL (no `value` part) and "<empty>"
 * means the empty string. The old name ByoyomiMargin sets NetworkDelay and NetworkDelay2. Returns 0 with *canonical (may be NULL) set to the
 * option's name, or -1 with err saying why (unknown name, bad value); the
 * options are then unchanged. */
int usi_options_set(usi_options_t *o, const char *name, const char *value, const char **canonical, char *err,
                    size_t errlen);

#endif
