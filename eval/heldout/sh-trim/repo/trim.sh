#!/bin/sh
# trim.sh: copies standard input to standard output without trailing blanks
# (spaces and tabs) at the ends of lines.
sed 's/ *$//'
