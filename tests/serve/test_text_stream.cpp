// TextStream: whole UTF-8 characters only, stop strings across token
// boundaries, nothing lost at the end.
#include <gtest/gtest.h>

#include "serve/text_stream.h"

namespace {

using weft::serve::incomplete_utf8_tail;
using weft::serve::TextStream;

TEST(TextStream, HoldsAnIncompleteCharacterUntilItCompletes) {
  TextStream t;
  EXPECT_FALSE(t.append("h\xC3"));  // é split across two tokens
  EXPECT_EQ(t.take_ready(), "h");
  t.append("\xA9!");
  EXPECT_EQ(t.take_ready(), "\xC3\xA9!");
  t.append("\xF0\x9F");  // half of an emoji
  EXPECT_EQ(t.take_ready(), "");
  t.append("\x99\x82");
  EXPECT_EQ(t.take_ready(), "\xF0\x9F\x99\x82");
  t.append("\xE4");  // a request that ends mid-character hands over what it has
  EXPECT_EQ(t.take_all(), "\xE4");
}

TEST(TextStream, IncompleteTailCountsOnlyUnfinishedSequences) {
  EXPECT_EQ(incomplete_utf8_tail(""), 0u);
  EXPECT_EQ(incomplete_utf8_tail("abc"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("a\xC3"), 1u);
  EXPECT_EQ(incomplete_utf8_tail("a\xE4\xB8"), 2u);
  EXPECT_EQ(incomplete_utf8_tail("a\xE4\xB8\x96"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("\xF0\x9F\x99"), 3u);
  EXPECT_EQ(incomplete_utf8_tail("\x80\x80\x80\x80"), 0u);  // stray continuations: nothing to wait for
}

TEST(TextStream, StopStringSplitAcrossTokensEndsTheTextBeforeIt) {
  TextStream t({"END", "\n\n"});
  EXPECT_FALSE(t.append("one E"));
  EXPECT_EQ(t.take_ready(), "one ");  // "E" may begin END
  EXPECT_FALSE(t.append("N"));
  EXPECT_EQ(t.take_ready(), "");
  EXPECT_TRUE(t.append("Dtwo"));
  EXPECT_TRUE(t.stopped());
  EXPECT_EQ(t.take_ready(), "");
  EXPECT_EQ(t.take_all(), "");
  EXPECT_TRUE(t.append("more"));  // nothing after a stop
}

TEST(TextStream, AFalseStartIsHandedOver) {
  TextStream t({"END"});
  t.append("EN");
  EXPECT_EQ(t.take_ready(), "");
  t.append("d");
  EXPECT_EQ(t.take_ready(), "ENd");
}

TEST(TextStream, TheEarliestStopWins) {
  TextStream t({"b", "abc"});
  EXPECT_TRUE(t.append("xxabcx"));
  EXPECT_EQ(t.take_all(), "xx");  // "abc" begins before "b"
}

TEST(TextStream, EmptyStopStringsAreIgnored) {
  TextStream t({""});
  EXPECT_FALSE(t.append("abc"));
  EXPECT_EQ(t.take_ready(), "abc");
}

}  // namespace
