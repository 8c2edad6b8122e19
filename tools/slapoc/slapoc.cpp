//===- slapoc.cpp - the slapoc compiler -----------------------------------===//
#include "slapo/Driver/Driver.h"

int main(int argc, char **argv) { return slapo::runSlapocMain(argc, argv); }
