// apps/suggest.h -- "did you mean": the declared name nearest to a mistyped command or flag.
//
// reference: git's help.autocorrect and argparse's suggest_on_error (a near name proposed, never run). docs:
// docs/cli.md "Errors and help".
//
// Distance: optimal string alignment (Levenshtein plus the swap of two neighbours, so "trian" is one edit from
// "train"). A name is proposed when it is at most max(2, |typed| / 3) edits away (1 for 3 characters or fewer), or when the typed text is a prefix
// of exactly one name; the nearest wins, ties go to the first declared.
#pragma once

#include <string>
#include <vector>

namespace razor::apps {

// Edits (insert, delete, substitute, swap two neighbours) from a to b.
size_t edit_distance(const std::string& a, const std::string& b);

// The name of `names` nearest to `typed` by the rule above; "" when none is near.
std::string nearest_name(const std::string& typed, const std::vector<std::string>& names);

}  // namespace razor::apps
